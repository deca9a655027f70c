"""The streaming loader: tokens/s per worker against fms-fsdp's pipeline, and state save/load.

    python benches/bench_loader.py [--tokens 2e9] [--quick] [--fms-fsdp PATH] [--workdir DIR]

* Per-worker throughput on a synthetic ``.bin/.idx`` corpus (uint16, log-normal documents of
  ~1.5k tokens, two sub-datasets mixed 3:1), batches of 8 x 4096 as numpy int64 with
  ``doc_lens``: one worker owning the whole corpus, with and without a 1000-line shuffle buffer,
  and worker 0 of Bamba's layout (960 logical shards over 192 workers).
* fms-fsdp's pure-Python pipeline (StreamingDoc → ScalableShard → Sampling → Buffer →
  PreloadBuffer), run from a fetched copy of foundation-model-stack/fms-fsdp (never part of
  this repository; ``--fms-fsdp`` is a checkout or a bare git directory), on the same documents
  written as Arrow files (its format), same layout and window.
* State save and load for 1k, 10k and 100k logical shards, and with a full 1000-line buffer: a
  checkpoint of 8 ranks x 4 workers whose mix schedule has three phases (so the state holds the
  schedule and the tokens drawn per phase). ``save``: what rank 0 waits for, ``save_state`` of
  its part and the commit, the other ranks' parts written meanwhile (each of them waits for its
  part only: ``save_part``); ``load``: what a loader does on resume: ``load_state`` of the
  directory, its checks against the stream (``check_state``) and one worker's tables, each state
  checked once. Measured on the work directory's disk (every file is fsynced: on a shared disk
  that dominates) and in RAM (``/dev/shm``, where present: the cost of the code).

Targets: >= 100 M tokens/s per worker (issue 6); save and load each <= 20 ms at 10k logical
shards and <= 200 ms at 100k (issue 43); state size O(logical shards + buffered tokens x 4 B).
Prints one JSON object per measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from corpus_gen import write_indexed

from tokshuf.stream import MixPhase, SubDataset, TokenStream, load_state, merge_states, save_state
from tokshuf.stream.state import worker_tables

SEQ, BATCH = 4096, 8


def emit(**kw: Any) -> None:
    print(json.dumps(kw), flush=True)


def best_rate(step: Any, tokens_per_step: int, seconds: float, repeat: int = 5) -> float:
    """Best of ``repeat`` timed runs of about ``seconds`` each, in tokens/s (robust to a loaded machine)."""
    n = 1
    t = time.perf_counter()
    step()
    one = max(time.perf_counter() - t, 1e-6)
    n = max(1, int(seconds / one))
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(n):
            step()
        best = min(best, time.perf_counter() - t)
    return n * tokens_per_step / best


def corpus(work: Path, tokens: int) -> list[Path]:
    out = []
    for name, share in (("web", 0.75), ("code", 0.25)):
        d = work / f"idx-{tokens}" / name
        if not (d / "part.idx").exists():
            d.mkdir(parents=True, exist_ok=True)
            write_indexed(d / "part", int(tokens * share), seed=len(name))
        out.append(d)
    return out


def stream(dirs: list[Path], **kw: Any) -> TokenStream:
    subs = [
        SubDataset.from_path(d.name, d, file_type="bin", weight=w) for d, w in zip(dirs, (3, 1), strict=True)
    ]
    kw.setdefault("logical_shards", 960)
    return TokenStream(subs, sequence_length=SEQ, batch_size=BATCH, chunk_size=1024, eos_token_id=0, **kw)


def bench_tokshuf(dirs: list[Path], seconds: float) -> dict[str, float]:
    rates = {}
    for name, workers, window in (
        ("1 worker, no buffer", 1, 0),
        ("1 worker, buffer 1000", 1, 1000),
        ("worker 0 of 192", 192, 0),
    ):
        w = stream(dirs, shuffle_window=window).worker(0, workers)
        w.skip(max(1, window // BATCH + 8))  # past the buffer's fill
        rate = best_rate(w.next_batch, BATCH * SEQ, seconds)
        rates[name] = rate
        emit(bench="loader_throughput", impl="tokshuf", layout=name, tokens_per_s=round(rate))
    return rates


def arrow_copy(dirs: list[Path], work: Path, tokens: int) -> Path:
    """The first ``tokens`` tokens of each sub-dataset as fms-fsdp's Arrow files."""
    import pyarrow as pa

    import tokshuf

    root = work / f"arrow-{tokens}"
    for d in dirs:
        out = root / d.name
        if (out / "part.arrow").exists():
            continue
        out.mkdir(parents=True, exist_ok=True)
        ds = tokshuf.IndexedDataset(d / "part")
        schema = pa.schema([pa.field("tokens", pa.uint32())])
        budget = tokens * (3 if d.name == "web" else 1) // 4
        with pa.ipc.new_file(str(out / "part.arrow"), schema) as wr:
            for i in range(len(ds)):
                doc = ds[i].astype(np.uint32)
                wr.write(pa.record_batch([pa.array(doc)], schema=schema))
                budget -= len(doc)
                if budget <= 0:
                    break
    return root


def fms_source(path: str, work: Path) -> Path | None:
    p = Path(path)
    if (p / "fms_fsdp" / "utils" / "dataset_utils.py").exists():
        return p
    if (p / "HEAD").exists() or (p / ".git").exists():  # a bare mirror: export the package
        dest = work / "fms-fsdp-src"
        if not (dest / "fms_fsdp").exists():
            dest.mkdir(parents=True, exist_ok=True)
            tar = subprocess.run(
                ["git", f"--git-dir={p}", "archive", "HEAD", "fms_fsdp"], capture_output=True, check=True
            )
            subprocess.run(["tar", "-x", "-C", str(dest)], input=tar.stdout, check=True)
        return dest
    return None


def bench_fms(src: Path, arrow: Path, seconds: float) -> dict[str, float]:
    sys.modules.setdefault(
        "transformers", types.SimpleNamespace(AutoTokenizer=None)
    )  # only its parquet path needs it
    sys.path.insert(0, str(src))
    import logging

    logging.disable(logging.WARNING)
    from fms_fsdp.utils import dataset_utils as fu

    rates = {}
    for name, workers, window in (("worker 0 of 192", 192, 0), ("worker 0 of 192, buffer 1000", 192, 1000)):
        sub = [d.name for d in sorted(arrow.iterdir())]
        data = fu.StreamingDocDataset(
            str(arrow / sub[0]), 0, workers, fu.ArrowHandler(), 0, strip_tokens={0}, min_length=3, seed=2023
        )
        data = fu.ScalableShardDataset(data, 0, n_logical_shards=960)
        data = fu.SamplingDataset(str(arrow), data, 0, datasets=["web", "code"], weights=[3, 1])
        data = fu.BufferDataset(data, SEQ + 1, pack_hard=True)
        if window:
            data = fu.PreloadBufferDataset(data, window)
        it = iter(data)
        for _ in range(window + 8):
            next(it)
        rate = best_rate(it.__next__, SEQ + 1, seconds, repeat=3)
        rates[name] = rate
        emit(bench="loader_throughput", impl="fms-fsdp", layout=name, tokens_per_s=round(rate))
    return rates


#: The state targets (issue 43): save and load each, in ms, per logical shard count.
STATE_TARGET_MS = {10_000: 20.0, 100_000: 200.0}


def bench_state(dirs: list[Path], work: Path, shards: list[int]) -> None:
    ram = Path("/dev/shm")
    places = [("disk", work)] + ([("ram", ram / f"tokshuf-bench-{os.getpid()}")] if ram.is_dir() else [])
    try:
        for n, window in [(s, 0) for s in shards] + [(10_000, 1000)]:
            for where, root in places:
                _bench_state_once(dirs, root, n, window, where)
    finally:
        if len(places) > 1:
            shutil.rmtree(places[1][1], ignore_errors=True)


def _bench_state_once(dirs: list[Path], work: Path, n: int, window: int, where: str) -> None:
    ranks, per_rank = 8, 4
    schedule = [MixPhase("1,1", start_step=2), MixPhase("1,3", start_step=4)]
    st = stream(dirs, logical_shards=n, shuffle_window=window, mix_schedule=schedule)
    parts = []
    for r in range(ranks):
        sections = {}
        for i in range(per_rank):
            g = r * per_rank + i
            w = st.worker(g, ranks * per_rank, step=i, step_stride=per_rank)
            w.skip(max(6, window // BATCH + 4))  # through the three phases
            sections[g] = w.tables()
        topo = {"world_size": ranks, "num_workers": per_rank, "workers": ranks * per_rank, "ranks": [r]}
        parts.append(st.state(sections, topo, st.schedule(ranks)))
    whole = merge_states(parts)
    assert len(whole["history"]), "the state should hold tokens drawn in phases left"
    d = work / "ckpt"
    d.parent.mkdir(parents=True, exist_ok=True)
    save_best = part_best = load_best = float("inf")
    for _ in range(5):
        shutil.rmtree(d, ignore_errors=True)
        for part in parts[2:]:
            save_state(d, part)
        t = time.perf_counter()
        save_state(d, parts[1])
        part_best = min(part_best, time.perf_counter() - t)
        t = time.perf_counter()
        save_state(d, parts[0])  # rank 0: its part, then the commit (every part is there)
        save_best = min(save_best, time.perf_counter() - t)
        t = time.perf_counter()
        back = st.check_state(load_state(d), ranks)
        worker_tables(back, 0, ranks * per_rank)
        load_best = min(load_best, time.perf_counter() - t)
    assert np.array_equal(back["rows"], whole["rows"])
    size = sum(p.stat().st_size for p in d.iterdir())
    buffered = int(whole["buffer"][:, 7].sum()) if len(whole["buffer"]) else 0
    target = STATE_TARGET_MS.get(n) if window == 0 else None
    emit(
        bench="loader_state",
        where=where,
        logical_shards=n,
        sub_datasets=2,
        workers=ranks * per_rank,
        mix_phases=3,
        buffered_tokens=buffered,
        save_ms=round(save_best * 1e3, 2),
        save_part_ms=round(part_best * 1e3, 2),
        load_ms=round(load_best * 1e3, 2),
        bytes=size,
        bytes_per_row=round(size / (2 * n), 1),
        **(
            {}
            if target is None
            else {
                "target_ms": target,
                "save_over_target": round(save_best * 1e3 / target, 2),
                "load_over_target": round(load_best * 1e3 / target, 2),
            }
        ),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=float, default=2e9, help="corpus size in tokens (uint16: 2 bytes each)")
    ap.add_argument("--fms-tokens", type=float, default=50e6, help="tokens copied to Arrow for fms-fsdp")
    ap.add_argument("--seconds", type=float, default=2.0, help="length of one timed run")
    ap.add_argument(
        "--fms-fsdp",
        default=os.environ.get("FMS_FSDP", ""),
        help="a checkout (or bare git dir) of foundation-model-stack/fms-fsdp; default $FMS_FSDP",
    )
    ap.add_argument("--workdir", default=None, help="where corpora are generated (reused between runs)")
    ap.add_argument("--state-shards", default="1000,10000,100000")
    ap.add_argument("--state-only", action="store_true", help="only the state save/load measurements")
    ap.add_argument(
        "--quick", action="store_true", help="small scale: 100 M tokens, 5 M for fms-fsdp, short runs"
    )
    args = ap.parse_args()
    if args.quick:
        args.tokens, args.fms_tokens, args.seconds = 1e8, 5e6, 0.5
    work = Path(args.workdir) if args.workdir else Path(tempfile.gettempdir()) / "tokshuf-bench-loader"
    work.mkdir(parents=True, exist_ok=True)
    emit(
        bench="loader_setup",
        tokens=int(args.tokens),
        workdir=str(work),
        note="timings on a shared, loaded machine are rough",
    )
    dirs = corpus(work, int(args.tokens))
    if args.state_only:
        bench_state(dirs, work, [int(s) for s in args.state_shards.split(",")])
        return
    ours = bench_tokshuf(dirs, args.seconds)
    src = fms_source(args.fms_fsdp, work) if args.fms_fsdp else None
    if src is None:
        emit(bench="loader_throughput", impl="fms-fsdp", skipped=f"no fms-fsdp at {args.fms_fsdp}")
    else:
        theirs = bench_fms(src, arrow_copy(dirs, work, int(args.fms_tokens)), args.seconds)
        for layout in ("worker 0 of 192",):
            emit(
                bench="loader_ratio", layout=layout, tokshuf_over_fms=round(ours[layout] / theirs[layout], 1)
            )
        emit(
            bench="loader_ratio",
            layout="buffer 1000 (tokshuf: 1 worker, fms: worker 0 of 192)",
            tokshuf_over_fms=round(ours["1 worker, buffer 1000"] / theirs["worker 0 of 192, buffer 1000"], 1),
        )
    bench_state(dirs, work, [int(s) for s in args.state_shards.split(",")])


if __name__ == "__main__":
    main()
