"""The loader's guarantees (spec §16) as property tests on random corpora and topologies,
with ranks and DataLoader workers simulated in one process. (test_stream_dataloader.py runs
each guarantee again through real torch DataLoader workers.)"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from stream_helpers import (
    BOS,
    EOS,
    FIRST_ID,
    STRIP,
    check_save_load_state,
    corpora,
    epoch_done,
    epoch_tokens,
    flat_docs,
    lines_of,
    make_stream,
    owned_tokens,
    read_epoch,
    scratch,
    simple_corpus,
    tables,
)
from stream_reference import Cfg, emitted

from tokshuf.errors import ConfigError
from tokshuf.stream import merge_states, worker_tables
from tokshuf.stream.state import shard_docs, worker_shards


def _workers(stream: Any, n: int, state: Any = None) -> list[Any]:
    return [stream.worker(g, n, state) for g in range(n)]


def _merged(ws: list[Any]) -> dict[str, Any]:
    n = len(ws)
    return merge_states([w.state_dict(world_size=n, rank=g) for g, w in enumerate(ws)])


# 1. Exact partition ---------------------------------------------------------------------------
@given(n_docs=st.integers(0, 300), shards=st.integers(1, 64), workers=st.integers(1, 64))
def test_partition_is_exact(n_docs: int, shards: int, workers: int) -> None:
    owner = [None] * n_docs
    for s in range(shards):
        for d in shard_docs(n_docs, shards, s):
            assert owner[d] is None
            owner[d] = s
    assert None not in owner
    sizes = [len(shard_docs(n_docs, shards, s)) for s in range(shards)]
    assert max(sizes) - min(sizes) <= 1
    assume(workers <= shards)
    seen = [w for w in range(workers) for _ in worker_shards(shards, workers, w)]
    assert len(seen) == shards
    assert seen == sorted(seen)


@given(corpus=corpora(), shards=st.integers(4, 10), workers=st.integers(1, 4))
@settings(max_examples=25)
def test_every_document_is_read_by_its_one_owner(corpus: Any, shards: int, workers: int) -> None:
    with scratch() as tmp:
        stream = make_stream(Path(tmp), corpus, logical_shards=shards)
        docs = flat_docs(corpus)
        readers: dict[tuple[int, int], set[int]] = defaultdict(set)
        for g, w in enumerate(_workers(stream, workers)):
            for b in read_epoch(w):
                for _line, _at, sub, shard, _ep, doc, _s, _n in b["segments"]:
                    assert shard in worker_shards(shards, workers, g)
                    assert doc in shard_docs(len(docs[sub]), shards, shard)
                    readers[(int(sub), int(doc))].add(g)
        assert all(len(r) == 1 for r in readers.values())
        cfg = Cfg(0, shards, [1], 9, 5, eos=EOS)
        want = {(s, d) for s, sub in enumerate(docs) for d, doc in enumerate(sub) if emitted(doc, cfg)}
        assert set(readers) == want


# 2. Per-epoch permutation (and B1) ------------------------------------------------------------
@given(corpus=corpora(max_subs=1, max_docs=20), shards=st.integers(1, 5))
@settings(max_examples=25)
def test_each_epoch_reads_every_document_once(corpus: Any, shards: int) -> None:
    with scratch() as tmp:
        stream = make_stream(Path(tmp), corpus, logical_shards=shards, strip_tokens=[STRIP])
        docs = flat_docs(corpus)[0]
        w = stream.worker(0, 1)
        batches = read_epoch(w, epoch=1)
        cfg = Cfg(0, shards, [1], 9, 5, eos=EOS, strip=(STRIP,))
        for epoch in (0, 1):
            starts = defaultdict(list)
            for b in batches:
                for _l, _a, _sub, shard, ep, doc, start, _n in b["segments"]:
                    if ep == epoch and start == 0:
                        starts[int(shard)].append(int(doc))
            for s in range(shards):
                want = sorted(d for d in shard_docs(len(docs), shards, s) if emitted(docs[d], cfg))
                assert sorted(starts[s]) == want, f"shard {s} epoch {epoch}"


def test_epochs_use_different_orders() -> None:
    with scratch() as tmp:
        stream = make_stream(Path(tmp), simple_corpus([[[3] * 40]]), logical_shards=1, sequence_length=4)
        w = stream.worker(0, 1)
        order: dict[int, list[int]] = defaultdict(list)
        for b in read_epoch(w, epoch=1):
            for _l, _a, _s, _sh, ep, doc, start, _n in b["segments"]:
                if start == 0:
                    order[int(ep)].append(int(doc))
        assert sorted(order[0]) == sorted(order[1]) == list(range(40))
        assert order[0] != order[1]
        assert order[0] != list(range(40))


def test_b1_an_empty_document_does_not_stall_the_walk() -> None:
    # B1: fms-fsdp's walk stuck on an empty document: 24 of 63 documents in 21 epochs.
    sizes = [[[0 if d == 10 else 5 for d in range(64)]]]
    with scratch() as tmp:
        stream = make_stream(Path(tmp), simple_corpus(sizes), logical_shards=1)
        w = stream.worker(0, 1)
        batches = read_epoch(w, epoch=2)
        for epoch in range(3):
            docs = Counter(
                int(d) for b in batches for *_, ep, d, s, _n in b["segments"] if ep == epoch and s == 0
            )
            assert sorted(docs) == [d for d in range(64) if d != 10]
            assert set(docs.values()) == {1}


# 3. Chunk round trip ------------------------------------------------------------------------
@given(
    corpus=corpora(max_subs=2),
    chunk=st.integers(1, 7),
    bos=st.booleans(),
    weights=st.lists(st.integers(1, 4), min_size=2, max_size=2),
)
@settings(max_examples=25)
def test_documents_reassemble_and_switch_only_at_chunk_ends(
    corpus: Any, chunk: int, bos: bool, weights: Any
) -> None:
    with scratch() as tmp:
        kw = {"bos_token_id": BOS if bos else None, "strip_tokens": [STRIP], "chunk_size": chunk}
        stream = make_stream(Path(tmp), corpus, weights=weights[: len(corpus)], **kw)
        docs = flat_docs(corpus)
        cfg = Cfg(0, 6, [1], 9, chunk, bos=kw["bos_token_id"], eos=EOS, strip=(STRIP,))
        pieces: dict[tuple[int, int], list[tuple[int, list[int]]]] = defaultdict(list)
        for g, w in enumerate(_workers(stream, 2)):
            for b in read_epoch(w):
                lines = lines_of(b)
                for line, at, sub, _sh, ep, doc, start, n in b["segments"]:
                    run = lines[line, at : at + n].tolist()
                    if ep == 0:
                        pieces[(int(sub), int(doc))].append((int(start), run))
                    e = emitted(docs[sub][doc], cfg)
                    end = start + n
                    # A run stops at a chunk end, at the document's end, or at the line's end.
                    assert end % chunk == 0 or end == len(e) or at + n == lines.shape[1], (g, sub, doc)
        for (sub, doc), parts in pieces.items():
            parts.sort()
            whole = [t for _, p in parts for t in p]
            e = emitted(docs[sub][doc], cfg)
            assert whole == e
            assert whole.count(BOS) <= (1 if bos else 0) or BOS in docs[sub][doc]


# 4. Token conservation ----------------------------------------------------------------------
@given(corpus=corpora(max_subs=2), workers=st.integers(1, 4), window=st.integers(0, 5))
@settings(max_examples=25)
def test_one_epoch_emits_every_token_exactly_once(corpus: Any, workers: int, window: int) -> None:
    with scratch() as tmp:
        stream = make_stream(Path(tmp), corpus, shuffle_window=window, strip_tokens=[STRIP])
        got: Counter[int] = Counter()
        for w in _workers(stream, workers):
            got += epoch_tokens(read_epoch(w))
        assert got == owned_tokens(corpus)


# 5. Bit-exact resume chains ----------------------------------------------------------------
@given(
    corpus=corpora(max_subs=2),
    window=st.integers(0, 6),
    steps=st.lists(st.integers(0, 7), min_size=1, max_size=4),
    worker=st.integers(0, 2),
)
@settings(max_examples=25)
def test_resume_chains_are_bit_exact(corpus: Any, window: int, steps: list[int], worker: int) -> None:
    with scratch() as tmp:
        stream = make_stream(Path(tmp), corpus, shuffle_window=window, batch_size=2, position_ids=True)
        try:
            stream.worker(worker, 3).next_batch()
        except ConfigError:
            return  # this worker owns no text
        check_save_load_state(
            lambda st_: stream.worker(worker, 3, st_),
            lambda w: w.next_batch(),
            lambda w: w.state_dict(world_size=3, rank=worker),
            steps,
            5,
            Path(tmp),
        )


def test_resume_at_an_epoch_end_and_during_buffer_fill() -> None:
    with scratch() as tmp:
        corpus = simple_corpus([[[7, 3, 9, 1, 12, 5, 4]]])
        stream = make_stream(Path(tmp), corpus, logical_shards=2, shuffle_window=0)
        w = stream.worker(0, 1)
        epoch_end = len(read_epoch(w))  # batches after which the first epoch is complete
        assert epoch_done(w)
        for window, steps in ((0, [epoch_end]), (0, [epoch_end - 1, 1]), (30, [1, 2, 3]), (30, [epoch_end])):
            s = make_stream(Path(tmp) / f"w{window}{steps}", corpus, logical_shards=2, shuffle_window=window)
            check_save_load_state(
                lambda st_, s=s: s.worker(0, 1, st_),
                lambda w: w.next_batch(),
                lambda w: w.state_dict(),
                steps,
                8,
                Path(tmp) / f"c{window}{steps}",
            )


# 7. No revisit across rescale chains (and B5, B6) ------------------------------------------
@given(
    corpus=corpora(max_subs=2, max_docs=12),
    sizes=st.lists(st.integers(1, 12), min_size=2, max_size=3),
    cuts=st.lists(st.integers(0, 4), min_size=2, max_size=3),
    window=st.integers(0, 4),
)
@settings(max_examples=30)
def test_rescale_chains_lose_and_repeat_nothing(
    corpus: Any, sizes: list[int], cuts: list[int], window: int
) -> None:
    with scratch() as tmp:
        stream = make_stream(
            Path(tmp), corpus, logical_shards=12, shuffle_window=window, strip_tokens=[STRIP]
        )
        got: Counter[int] = Counter()
        state = None
        for n, cut in zip(sizes, cuts, strict=False):
            ws = _workers(stream, n, state)
            for w in ws:
                for _ in range(cut):
                    try:
                        got.update(epoch_tokens([w.next_batch()]))
                    except ConfigError:
                        break
            state = _merged(ws)
        for w in _workers(stream, sizes[-1], state):
            got += epoch_tokens(read_epoch(w))
        assert got == owned_tokens(corpus)


def test_b5_b6_rescale_twice_in_a_row_and_up_into_finished_shards() -> None:
    corpus = simple_corpus([[[4, 9, 2, 6, 3, 8, 5, 7, 1, 6, 2, 9]]])  # one document per shard
    with scratch() as tmp:
        stream = make_stream(Path(tmp), corpus, logical_shards=12, shuffle_window=3)
        ws = _workers(stream, 2)
        got = epoch_tokens(read_epoch(ws[0]))  # worker 0 finishes all its shards' epoch
        got += epoch_tokens([ws[1].next_batch()])
        # B6: 2 -> 12 gives new workers nothing but finished shards (fms-fsdp asserted there).
        state = _merged(ws)
        ws = _workers(stream, 12, state)
        finished = [all(r[2] >= 1 for r in tables(w)[0]) for w in ws]
        assert any(finished)
        assert not all(finished)
        # B5: 12 -> 5 -> 7 straight away, with buffers of unequal lengths (fms-fsdp crashed).
        for n in (5, 7):
            state = _merged(ws)
            ws = _workers(stream, n, state)
        lens = [len({int(s) for s in tables(w)[1][:, 0]}) for w in ws]
        assert len(set(lens)) > 1
        for w in ws:
            got += epoch_tokens(read_epoch(w))
        assert got == owned_tokens(corpus)


# 8. Mixing bound ----------------------------------------------------------------------------
@given(
    weights=st.lists(st.integers(1, 20), min_size=2, max_size=4),
    chunk=st.integers(1, 16),
    seed=st.integers(0, 1000),
    rescale=st.integers(0, 30),
)
@settings(max_examples=25)
def test_every_share_stays_within_one_chunk(weights: list[int], chunk: int, seed: int, rescale: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = [[[int(x) for x in rng.integers(0, 40, 30)]] for _ in weights]
    with scratch() as tmp:
        stream = make_stream(
            Path(tmp), simple_corpus(sizes), weights=weights, chunk_size=chunk, logical_shards=4, seed=seed
        )
        w = stream.worker(0, 2)
        for _ in range(rescale):
            w.next_batch()
        # After a rescale the counters restart at zero and the bound holds again from there.
        w = _workers(stream, 3, _merged([w, stream.worker(1, 2)]))[0]
        tokens = np.zeros(len(weights), np.int64)
        wsum = sum(weights)
        for _ in range(150):
            b = w.next_batch()
            for *_, sub, _sh, _ep, _d, _s, n in b["segments"]:
                tokens[sub] += n
            total = tokens.sum()
            dev = np.abs(tokens * wsum - np.array(weights) * total)
            assert (dev <= chunk * wsum).all(), (tokens, weights)
        assert np.allclose(tokens / tokens.sum(), np.array(weights) / wsum, atol=chunk / tokens.sum() + 1e-9)


# 11. Seeds: per global worker, never per construction order ---------------------------------
def test_streams_depend_on_seed_and_global_worker_only() -> None:
    corpus = simple_corpus([[[5] * 30, [6] * 20]])
    with scratch() as tmp:
        a = make_stream(Path(tmp) / "a", corpus, shuffle_window=4, seed=3)
        b = make_stream(Path(tmp) / "b", corpus, shuffle_window=4, seed=3)
        c = make_stream(Path(tmp) / "c", corpus, shuffle_window=4, seed=4)
        later = [b.worker(g, 3) for g in (2, 1, 0)][::-1]  # built in another order
        first = [a.worker(g, 3) for g in range(3)]
        runs = [[lines_of(w.next_batch()).tolist() for _ in range(5)] for w in first]
        assert runs == [[lines_of(w.next_batch()).tolist() for _ in range(5)] for w in later]
        assert len({str(r) for r in runs}) == 3  # distinct workers, distinct streams
        assert runs[0] != [lines_of(c.worker(0, 3).next_batch()).tolist() for _ in range(5)]


# 12. Shuffle-buffer conservation across reshards --------------------------------------------
@given(w1=st.integers(1, 6), w2=st.integers(1, 6), w3=st.integers(1, 6), k=st.integers(0, 6))
@settings(max_examples=25)
def test_pooled_buffers_are_conserved(w1: int, w2: int, w3: int, k: int) -> None:
    corpus = simple_corpus([[[4, 7, 2, 9, 5, 3, 8, 6, 1, 7, 4, 3, 9, 2]]])
    with scratch() as tmp:
        stream = make_stream(Path(tmp), corpus, logical_shards=6, shuffle_window=5)
        ws = _workers(stream, w1)
        for w in ws:
            for _ in range(k):
                w.next_batch()
        state = _merged(ws)

        def pooled(st_: dict[str, Any]) -> Counter[tuple[int, ...]]:
            return Counter(tuple(int(x) for x in r[2:]) for r in st_["buffer"])

        before = pooled(state)
        for n in (w2, w3):  # W1 -> W2 -> W3 with no reading in between (unequal lengths)
            ws = _workers(stream, n, state)
            state = _merged(ws)
            assert pooled(state) == before
            lens = [len({int(s) for s in tables(w)[1][:, 0]}) for w in ws]
            assert max(lens) - min(lens) <= 1 or sum(lens) == 0


def test_rescale_requires_every_rank() -> None:
    with scratch() as tmp:
        stream = make_stream(Path(tmp), simple_corpus([[[5] * 12]]))
        part = stream.worker(0, 2).state_dict(world_size=2, rank=0)
        stream.worker(0, 2, part)  # same topology: one rank's part is enough
        with pytest.raises(ConfigError, match="load every rank"):
            stream.worker(0, 3, part)
        with pytest.raises(ConfigError, match="load every rank"):
            worker_tables(part, 1, 3)


def test_too_many_workers_is_a_clear_error() -> None:
    with scratch() as tmp:
        stream = make_stream(Path(tmp), simple_corpus([[[5] * 12]]), logical_shards=4)
        with pytest.raises(ConfigError, match="logical shards"):
            stream.worker(3, 5)


def test_unique_ids_really_are_unique() -> None:
    assert max(EOS, BOS, STRIP) < FIRST_ID
