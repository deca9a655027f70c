"""The stream's Python surface: batch fields, dtypes, output recycling, weights, pickling."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stream_helpers import EOS, lines_of, make_stream, scratch, simple_corpus

from tokshuf.errors import ConfigError
from tokshuf.stream import LoaderConfig
from tokshuf.stream.config import build_stream
from tokshuf.stream.stream import integer_weights

CORPUS = simple_corpus([[[3, 11, 1, 7, 2, 5], [9, 4]], [[6, 6, 13, 2]]])


def test_batch_fields_agree_with_the_document_runs() -> None:
    with scratch() as tmp:
        s = make_stream(
            Path(tmp),
            CORPUS,
            weights=[3, 1],
            batch_size=3,
            sequence_length=10,
            position_ids=True,
            label_mask_boundaries=True,
        )
        w = s.worker(0, 1)
        for _ in range(6):
            b = w.next_batch()
            n = b["input"].shape[1]
            for line in range(3):
                segs = b["segments"][b["segments"][:, 0] == line]
                starts = [int(a) for a in segs[:, 1]]
                lens = [int(x) for x in segs[:, 7]]
                # doc_lens: the runs clipped to the input window, zero-padded.
                clipped = [min(a + m, n) - a for a, m in zip(starts, lens, strict=True) if a < n]
                row = b["doc_lens"][line].tolist()
                assert row[: len(clipped)] == clipped
                assert not any(row[len(clipped) :])
                assert sum(clipped) == n
                # position_ids restart at every run.
                want = [p for a, m in zip(starts, lens, strict=True) for p in range(m)][:n]
                assert b["position_ids"][line].tolist() == want
                # label = next token, except -100 where the next token opens another run.
                full = lines_of(b)[line]
                for t in range(n):
                    boundary = (t + 1) in starts
                    assert b["label"][line, t] == (-100 if boundary else full[t + 1])


def test_dtypes_and_unshifted_lines() -> None:
    with scratch() as tmp:
        outs = {}
        for dt in ("int64", "int32", "uint32"):
            s = make_stream(Path(tmp) / dt, CORPUS, token_dtype=dt)
            b = s.worker(0, 1).next_batch()
            assert b["input"].dtype == np.dtype(dt)
            outs[dt] = b["input"].astype(np.int64)
        assert np.array_equal(outs["int64"], outs["int32"])
        assert np.array_equal(outs["int64"], outs["uint32"])
        s = make_stream(Path(tmp) / "flat", CORPUS, add_extra_token=False, sequence_length=9)
        b = s.worker(0, 1).next_batch()
        assert b["input"] is b["label"]
        assert b["input"].shape == (1, 9)
        with pytest.raises(ConfigError, match="signed"):
            make_stream(Path(tmp) / "bad", CORPUS, token_dtype="uint32", label_mask_boundaries=True)
        with pytest.raises(ConfigError, match="token_dtype"):
            make_stream(Path(tmp) / "bad2", CORPUS, token_dtype="float32")


def test_output_arrays_are_reused_only_once_released() -> None:
    torch = pytest.importorskip("torch")
    with scratch() as tmp:
        s = make_stream(Path(tmp), CORPUS, batch_size=2)
        ref = [lines_of(b).copy() for b in (s.worker(0, 1).next_batch() for _ in range(1))]
        w = s.worker(0, 1)
        held = w.next_batch()
        view = torch.from_numpy(held["input"])  # a tensor keeps its array alive
        snapshot = view.clone()
        del held
        for _ in range(8):
            w.next_batch()
        assert torch.equal(view, snapshot)
        assert np.array_equal(snapshot.numpy(), ref[0][:, :-1])
        kept = [w.next_batch() for _ in range(6)]  # six live batches: six distinct buffers
        assert len({k["input"].ctypes.data for k in kept}) == 6


def test_integer_weights_are_exact() -> None:
    assert integer_weights([0.6, 0.4]) == [3, 2]
    assert integer_weights([1456, 1835, 27]) == [1456, 1835, 27]
    assert integer_weights([2, 4, 0]) == [1, 2, 0]
    assert integer_weights([1 / 3, 2 / 3]) == [1, 2]  # decimals as written, then reduced
    w = integer_weights([0.1234567891234, 0.9876543210987])  # too fine: rounded to 2^-40
    assert abs(sum(w) - 2**40) <= 1
    assert abs(w[0] / w[1] - 0.1234567891234 / 0.9876543210987) < 1e-9
    for bad in ([], [0, 0], [-1, 2], [float("nan")]):
        with pytest.raises(ConfigError):
            integer_weights(bad)


def test_stream_pickles_for_spawned_workers() -> None:
    with scratch() as tmp:
        s = make_stream(Path(tmp), CORPUS, shuffle_window=2)
        again = pickle.loads(pickle.dumps(s))
        a, b = s.worker(1, 2), again.worker(1, 2)
        assert all(np.array_equal(lines_of(a.next_batch()), lines_of(b.next_batch())) for _ in range(4))


def test_loader_config_discovers_and_validates(tmp_path: Path) -> None:
    from stream_helpers import write_corpus

    write_corpus(tmp_path, CORPUS)
    (tmp_path / "meta").mkdir()
    cfg = LoaderConfig(data_path=str(tmp_path), seq_length=8, logical_shards=4, eos_token=EOS, weights="2, 1")
    s = build_stream(cfg)
    assert [d.name for d in s.datasets] == ["sub0", "sub1"]
    assert s.weights == [2, 1]
    with pytest.raises(ConfigError, match="weights for"):
        build_stream(LoaderConfig(data_path=str(tmp_path), weights=[1, 2, 3]))
    with pytest.raises(ConfigError, match="unique"):
        build_stream(LoaderConfig(data_path=str(tmp_path), datasets="sub0,sub0"))


@pytest.mark.torch
def test_main_process_loader_state_protocol(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from tokshuf.stream import StreamingDataLoader, StreamingDataset

    s = make_stream(tmp_path, CORPUS, shuffle_window=3)

    def dl(state: Any = None) -> Any:
        d = StreamingDataLoader(StreamingDataset(s, rank=0, world_size=1, output="torch", snapshot_every=4))
        if state is not None:
            d.load_state_dict(state)
        return d

    ref_it = iter(dl())
    ref = [next(ref_it) for _ in range(10)]
    a = dl()
    it = iter(a)
    got = [next(it) for _ in range(6)]  # the state replays 2 batches past the last snapshot
    it = iter(dl(a.state_dict()))
    got += [next(it) for _ in range(4)]
    for x, y in zip(ref, got, strict=True):
        assert all(bool((x[k] == y[k]).all()) for k in x)


def test_a_file_changed_under_the_loader_is_detected() -> None:
    from stream_helpers import write_corpus

    from tokshuf.errors import FormatError

    with scratch() as tmp:
        s = make_stream(Path(tmp), CORPUS)
        write_corpus(Path(tmp), simple_corpus([[[3, 11, 1], [9, 4]], [[6, 6, 13, 2]]]))  # rewrite sub0
        with pytest.raises(FormatError, match="changed underneath"):
            s.worker(0, 1)


@pytest.mark.torch
def test_frequent_state_dicts_match_a_single_one(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from tokshuf.stream import StreamingDataLoader, StreamingDataset

    s = make_stream(tmp_path, CORPUS, shuffle_window=3)
    a = StreamingDataLoader(StreamingDataset(s, rank=0, world_size=1, output="numpy", snapshot_every=5))
    b = StreamingDataLoader(StreamingDataset(s, rank=0, world_size=1, output="numpy", snapshot_every=5))
    ia, ib = iter(a), iter(b)
    for step in range(12):
        next(ia)
        next(ib)
        sa = a.state_dict()  # every step: kept replay copy moves forward
        if step in (3, 11):
            sb = b.state_dict()
            for k in ("rows", "workers", "buffer"):
                assert np.array_equal(sa[k], sb[k])
