"""Every guarantee of the streaming loader again, through real ``torch.utils.data.DataLoader``
worker processes (num_workers > 1, prefetching), on a tiny fixed corpus with unique ids.

A few DataLoader sessions run once per module (fixtures) and each test checks one guarantee on
their output, to keep the number of worker start-ups small.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stream_helpers import (
    EOS,
    FIRST_ID,
    STRIP,
    batches_equal,
    disk_round_trip,
    epoch_tokens,
    flat_docs,
    lines_of,
    owned_tokens,
    write_corpus,
)
from stream_reference import Cfg, emitted

from tokshuf.stream import SubDataset, TokenStream, load_state, merge_states, save_state
from tokshuf.stream.state import shard_docs, worker_shards

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.torch,
    # 4 workers on a 2-core machine is the point of these tests, not a mistake.
    pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),
]

SHARDS = 12
CHUNK = 5


def _corpus() -> list[Any]:
    rng = np.random.default_rng(7)
    nxt = FIRST_ID
    corpus = []
    for n_files in (3, 2):
        files = []
        for _ in range(n_files):
            docs = []
            for _ in range(int(rng.integers(0, 12))):
                r = rng.random()
                if r < 0.08:
                    docs.append([])
                elif r < 0.14:
                    docs.append([STRIP])
                else:
                    n = int(rng.integers(1, 16))
                    doc = list(range(nxt, nxt + n))
                    nxt += n
                    if r < 0.2:
                        doc.insert(int(rng.integers(0, n)), EOS)  # an id that is not a boundary
                    docs.append(doc)
            files.append(docs)
        corpus.append(files)
    return corpus


CORPUS = _corpus()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("dl")
    write_corpus(r, CORPUS)
    return r


def make_stream(root: Path, window: int = 0, **kw: Any) -> TokenStream:
    subs = [
        SubDataset.from_path(f"sub{i}", root / f"sub{i}", file_type="bin", weight=w)
        for i, w in enumerate((2, 1))
    ]
    return TokenStream(
        subs,
        sequence_length=8,
        batch_size=2,
        logical_shards=SHARDS,
        chunk_size=CHUNK,
        eos_token_id=EOS,
        strip_tokens=[STRIP],
        shuffle_window=window,
        provenance=True,
        position_ids=True,
        **kw,
    )


def loader(
    stream: TokenStream,
    world: int,
    rank: int,
    nw: int,
    state: Any = None,
    output: str = "numpy",
    every: Any = None,
) -> Any:
    from tokshuf.stream import StreamingDataLoader, StreamingDataset

    ds = StreamingDataset(stream, rank=rank, world_size=world, output=output, snapshot_every=every)
    dl = StreamingDataLoader(ds, num_workers=nw, prefetch_factor=4 if nw else None)
    if state is not None:
        dl.load_state_dict(state)
    return dl


def numpy(b: dict[str, Any]) -> dict[str, Any]:
    return {k: np.asarray(v) for k, v in b.items()}


def per_worker(batches: list[dict[str, Any]], world: int, rank: int, nw: int) -> dict[int, list[Any]]:
    """Batches of a rank's loader split by global worker (torch deals them round-robin)."""
    out: dict[int, list[Any]] = defaultdict(list)
    for i, b in enumerate(batches):
        out[rank * max(nw, 1) + i % max(nw, 1)].append(b)
    return out


def epoch_finished(state: dict[str, Any], stream: TokenStream) -> bool:
    for sub, shard, ep, *_ in state["rows"]:
        if ep < 1 and len(shard_docs(stream.datasets[int(sub)].num_docs, SHARDS, int(shard))):
            return False
    return not bool((np.asarray(state["buffer"])[:, 4] < 1).any())


def read_epoch(dl: Any, stream: TokenStream, limit: int = 400) -> list[dict[str, Any]]:
    """Rounds of batches (one per worker) until the consumed state says epoch 0 is over."""
    out: list[dict[str, Any]] = []
    it = iter(dl)
    nw = max(dl.num_workers, 1)
    while not epoch_finished(dl.state_dict(), stream):
        out.extend(numpy(next(it)) for _ in range(nw))
        assert len(out) < limit
    return out


# Sessions ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def epoch_run(root: Path) -> dict[str, Any]:
    """No shuffle buffer, 1 rank x 4 workers, to the end of epoch 0."""
    stream = make_stream(root)
    dl = loader(stream, 1, 0, 4)
    batches = read_epoch(dl, stream)
    return {"stream": stream, "batches": batches, "by_worker": per_worker(batches, 1, 0, 4)}


@pytest.fixture(scope="module")
def topologies(root: Path) -> dict[str, Any]:
    """Shuffle buffer on, W = 4 global workers as 1x4, 2x2 (ranks built in reverse) and 4x0."""
    stream = make_stream(root, window=3)
    runs: dict[str, dict[int, list[Any]]] = {}
    for name, world, nw in (("1x4", 1, 4), ("2x2", 2, 2), ("4x1", 4, 0)):
        got: dict[int, list[Any]] = {}
        for rank in reversed(range(world)):
            it = iter(loader(stream, world, rank, nw))
            got.update(per_worker([numpy(next(it)) for _ in range(6 * max(nw, 1))], world, rank, nw))
        runs[name] = got
    return {"stream": stream, "runs": runs}


# 1-4: partition, permutation, chunks, conservation ----------------------------------------
def test_g1_each_worker_reads_only_its_shards(epoch_run: dict[str, Any]) -> None:
    docs = flat_docs(CORPUS)
    owner: dict[tuple[int, int], set[int]] = defaultdict(set)
    for g, batches in epoch_run["by_worker"].items():
        for b in batches:
            for _l, _a, sub, shard, _e, doc, _s, _n in b["segments"]:
                assert shard in worker_shards(SHARDS, 4, g)
                assert doc in shard_docs(len(docs[sub]), SHARDS, shard)
                owner[(int(sub), int(doc))].add(g)
    assert all(len(v) == 1 for v in owner.values())


def test_g2_each_shard_epoch_is_a_permutation(epoch_run: dict[str, Any]) -> None:
    docs = flat_docs(CORPUS)
    cfg = Cfg(0, SHARDS, [1], 9, CHUNK, eos=EOS, strip=(STRIP,))
    starts: dict[tuple[int, int], list[int]] = defaultdict(list)
    for b in epoch_run["batches"]:
        for _l, _a, sub, shard, ep, doc, start, _n in b["segments"]:
            if ep == 0 and start == 0:
                starts[(int(sub), int(shard))].append(int(doc))
    for sub, sd in enumerate(docs):
        for shard in range(SHARDS):
            want = [d for d in shard_docs(len(sd), SHARDS, shard) if emitted(sd[d], cfg)]
            assert sorted(starts[(sub, shard)]) == want


def test_g3_documents_reassemble_from_their_chunks(epoch_run: dict[str, Any]) -> None:
    docs = flat_docs(CORPUS)
    cfg = Cfg(0, SHARDS, [1], 9, CHUNK, eos=EOS, strip=(STRIP,))
    parts: dict[tuple[int, int], list[Any]] = defaultdict(list)
    for b in epoch_run["batches"]:
        lines = lines_of(b)
        for line, at, sub, _sh, ep, doc, start, n in b["segments"]:
            if ep == 0:
                parts[(int(sub), int(doc))].append((int(start), lines[line, at : at + n].tolist()))
    assert parts
    for (sub, doc), p in parts.items():
        assert [t for _, run in sorted(p) for t in run] == emitted(docs[sub][doc], cfg)


def test_g4_an_epoch_emits_every_token_once(epoch_run: dict[str, Any]) -> None:
    assert epoch_tokens(epoch_run["batches"]) == owned_tokens(CORPUS)


def test_g8_every_share_within_one_chunk_per_worker(epoch_run: dict[str, Any]) -> None:
    weights = np.array(epoch_run["stream"].weights)
    for batches in epoch_run["by_worker"].values():
        tokens = np.zeros(2, np.int64)
        live = set()
        for b in batches:
            for line in range(b["input"].shape[0]):
                for *_, sub, _sh, _e, _d, _s, n in b["segments"][b["segments"][:, 0] == line]:
                    tokens[sub] += n
                    live.add(int(sub))
                if len(live) == 2:  # both sub-datasets have text on this worker
                    dev = np.abs(tokens * weights.sum() - weights * tokens.sum())
                    assert (dev <= CHUNK * weights.sum()).all(), tokens


# 5, 9: bit-exact resume through prefetching workers (B3) -------------------------------------
@pytest.mark.parametrize(("window", "every"), [(0, None), (3, 4)])
def test_g5_g9_b3_resume_matches_consumed_batches(
    root: Path, tmp_path: Path, window: int, every: Any
) -> None:
    stream = make_stream(root, window=window)
    ref_it = iter(loader(stream, 1, 0, 2, every=every))
    ref = [numpy(next(ref_it)) for _ in range(17)]
    got: list[dict[str, Any]] = []
    state = None
    for i, k in enumerate((5, 1, 7, 4)):  # resumes after 5, 6 and 13 consumed batches
        dl = loader(stream, 1, 0, 2, state, every=every)
        it = iter(dl)
        got.extend(numpy(next(it)) for _ in range(k))
        # B3: workers have prefetched up to 4 batches each; the state must ignore them.
        state = disk_round_trip(dl.state_dict(), tmp_path / f"c{i}")
    for i, (a, b) in enumerate(zip(ref, got, strict=True)):
        assert batches_equal(a, b), f"batch {i}"


def test_a_mix_schedule_through_real_workers(root: Path, tmp_path: Path) -> None:
    """Phases at steps 4 and 9 (only sub0, then only sub1) with two DataLoader workers that
    prefetch: each step's batch follows its phase (but for the end of a chunk carried over per
    worker), and resumes at a boundary and inside a phase, on the same workers or on one, give
    what the uninterrupted run gives (same workers) and the phase's weights (one worker)."""
    from tokshuf.stream import MixPhase

    stream = make_stream(root, mix_schedule=[MixPhase([1, 0], start_step=4), MixPhase([0, 1], start_step=9)])
    ref_it = iter(loader(stream, 1, 0, 2))
    ref = [numpy(next(ref_it)) for _ in range(14)]

    def drawn(batches: list[dict[str, Any]]) -> np.ndarray[Any, Any]:
        out = np.zeros(2, np.int64)
        for b in batches:
            np.add.at(out, b["segments"][:, 2], b["segments"][:, 7])
        return out

    assert drawn(ref[4:9])[1] <= 2 * CHUNK  # two workers, each may finish one chunk of sub1
    assert drawn(ref[9:])[0] <= 2 * CHUNK
    for cut in (4, 7):
        dl = loader(stream, 1, 0, 2)
        it = iter(dl)
        got = [numpy(next(it)) for _ in range(cut)]
        state = disk_round_trip(dl.state_dict(), tmp_path / f"cut{cut}")
        same = iter(loader(stream, 1, 0, 2, state))
        rest = [numpy(next(same)) for _ in range(14 - cut)]
        assert all(batches_equal(a, b) for a, b in zip(ref, got + rest, strict=True)), f"resumed at {cut}"
        one = iter(loader(stream, 1, 0, 0, state))
        rescaled = [numpy(next(one)) for _ in range(14 - cut)]
        assert drawn(rescaled[: 9 - cut])[1] <= 3 * CHUNK  # the old workers' carry, the new one's
        assert drawn(rescaled[9 - cut :])[0] <= CHUNK


def test_g5_iterating_again_continues_the_stream(root: Path) -> None:
    stream = make_stream(root, window=2)
    ref_it = iter(loader(stream, 1, 0, 2))
    ref = [numpy(next(ref_it)) for _ in range(6)]
    dl = loader(stream, 1, 0, 2, output="torch")
    first = iter(dl)
    got = [numpy(next(first)) for _ in range(3)]
    second = iter(dl)  # a new iterator (an "epoch" loop) picks up after batch 3
    got += [numpy(next(second)) for _ in range(3)]
    with pytest.raises(RuntimeError, match="stale"):
        next(first)
    assert all(batches_equal(a, b) for a, b in zip(ref, got, strict=True))


# 6, 11: topology invariance and seeds (B7) ---------------------------------------------------
def test_g6_b7_same_global_workers_same_streams(topologies: dict[str, Any]) -> None:
    runs = topologies["runs"]
    for g in range(4):
        for name in ("2x2", "4x1"):
            assert all(batches_equal(a, b) for a, b in zip(runs["1x4"][g], runs[name][g], strict=True)), (
                g,
                name,
            )


def test_g11_global_workers_draw_distinct_streams(topologies: dict[str, Any]) -> None:
    runs = topologies["runs"]["1x4"]
    firsts = {str(lines_of(runs[g][0]).tolist()) for g in range(4)}
    assert len(firsts) == 4


def test_g6_from_a_checkpoint_any_split_of_the_same_worker_count(root: Path) -> None:
    stream = make_stream(root, window=3)
    ref = {}
    it = iter(loader(stream, 1, 0, 4))
    ref = per_worker([numpy(next(it)) for _ in range(4 * 5)], 1, 0, 4)
    parts = []
    for rank in (0, 1):  # save at 2 batches per worker from 2 ranks x 2 workers
        dl = loader(stream, 2, rank, 2)
        it = iter(dl)
        for _ in range(4):
            next(it)
        parts.append(dl.state_dict())
    state = merge_states(parts)
    it = iter(loader(stream, 4, 3, 0, state))  # resume global worker 3 alone, in the main process
    assert all(batches_equal(a, numpy(next(it))) for a in ref[3][2:5])


# 7, 12: rescale through workers ------------------------------------------------------------
def test_g7_g12_rescale_chain_loses_and_repeats_nothing(root: Path) -> None:
    stream = make_stream(root, window=3)
    got: Counter[int] = Counter()
    dl = loader(stream, 1, 0, 2)
    it = iter(dl)
    got += epoch_tokens([numpy(next(it)) for _ in range(6)])
    state = dl.state_dict()
    pooled = Counter(tuple(int(x) for x in r[2:]) for r in state["buffer"])
    # 2 -> 3 workers: the pooled buffers are dealt out unchanged, unequal lengths and all.
    dl = loader(stream, 1, 0, 3, state)
    rescaled = dl.state_dict()
    assert Counter(tuple(int(x) for x in r[2:]) for r in rescaled["buffer"]) == pooled
    it = iter(dl)
    got += epoch_tokens([numpy(next(it)) for _ in range(3)])
    # 3 -> 2 ranks x 2 workers, straight away.
    parts = [loader(stream, 1, 0, 3, dl.state_dict()).state_dict()]
    state = merge_states(parts)
    for rank in (0, 1):
        dl = loader(stream, 2, rank, 2, state)
        got += epoch_tokens(read_epoch(dl, _rank_view(stream)))
    assert got == owned_tokens(CORPUS)


def _rank_view(stream: TokenStream) -> TokenStream:
    return stream


# 10, 14: state size and the on-disk format -------------------------------------------------
def test_g10_state_is_compact(root: Path, tmp_path: Path) -> None:
    stream = make_stream(root, window=3)
    dl = loader(stream, 1, 0, 2)
    it = iter(dl)
    for _ in range(5):
        next(it)
    state = dl.state_dict()
    save_state(tmp_path, state)
    size = sum(p.stat().st_size for p in tmp_path.iterdir() if p.name.endswith(".npy"))
    rows, segs = len(state["rows"]), len(state["buffer"])
    assert rows == 2 * SHARDS
    buffered_tokens = int(np.asarray(state["buffer"])[:, 7].sum())
    assert segs <= buffered_tokens
    # rows, buffer segments, two workers' rows (5 columns + 2 mixer counters), npy headers
    assert len(state["history"]) == 0
    assert size <= 7 * 8 * rows + 8 * 8 * segs + 8 * 7 * 2 + 4 * 128


def test_g14_state_round_trips_through_disk_exactly(root: Path, tmp_path: Path) -> None:
    stream = make_stream(root, window=3)
    dl = loader(stream, 1, 0, 2)
    it = iter(dl)
    for _ in range(3):
        next(it)
    state = dl.state_dict()
    back = load_state(save_state(tmp_path, state))
    for k in ("rows", "workers", "buffer"):
        assert np.array_equal(state[k], back[k])
    assert back["manifest"] == state["manifest"]
    assert back["topology"]["workers"] == 2


# 13: handlers through the real constructor (B2) are in test_stream_handlers.py.


@pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")
def test_torchdata_stateful_dataloader_protocol(root: Path) -> None:
    sdl = pytest.importorskip("torchdata.stateful_dataloader")
    from tokshuf.stream import StreamingDataset

    stream = make_stream(root, window=2)

    def make() -> Any:
        return sdl.StatefulDataLoader(
            StreamingDataset(stream, rank=0, world_size=1, output="numpy"),
            batch_size=None,
            num_workers=2,
            collate_fn=lambda x: x,
        )

    it = iter(make())
    ref = [next(it) for _ in range(9)]
    dl = make()
    it = iter(dl)
    first = [next(it) for _ in range(5)]
    sd = dl.state_dict()
    dl2 = make()
    dl2.load_state_dict(sd)
    it2 = iter(dl2)
    rest = [next(it2) for _ in range(4)]
    assert all(batches_equal(a, b) for a, b in zip(ref, first + rest, strict=True))
