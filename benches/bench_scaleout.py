"""Benchmark: the cost of cutting a job into tasks, side by side with the one-node run.

    python benches/bench_scaleout.py                     # 200 MB corpus in 8 files, 2 rounds
    python benches/bench_scaleout.py --size 20MB --rounds 1

Corpus: ``tests/fixtures/make_corpus.py`` (``--size``, seed 0) split into 8 ``.jsonl.zst`` files
(tasks take whole files). On this machine's cores, each round runs, each side in a fresh state:

* ``preprocess`` one-node (``tokshuf preprocess --workers C``) against ``tokshuf.ray.preprocess``
  with C one-CPU tasks on a local Ray instance (``ray.init(num_cpus=C)``), the merge included;
* ``shuffle`` one-node (``--threads C``) against ``tokshuf.ray.shuffle`` with C cells tasks and C
  shards tasks, the manifest included.

The goal is >= 0.8x the one-node tokens/s (the cost of scheduling, part files and the merge).
Outputs are checked byte-equal. Ray's startup and its workers' first imports are not timed (a
cluster is up before a job): a warm-up job runs first.
Results: a table and ``--out/results.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MAKE_CORPUS = REPO / "tests" / "fixtures" / "make_corpus.py"
TOKENIZER = "tiktoken:cl100k_base"


def split_corpus(src: Path, out: Path, parts: int) -> None:
    import zstandard

    with src.open("rb") as f, zstandard.ZstdDecompressor().stream_reader(f) as r:
        lines = r.read().splitlines(keepends=True)
    out.mkdir(parents=True, exist_ok=True)
    for i in range(parts):
        chunk = b"".join(lines[i * len(lines) // parts : (i + 1) * len(lines) // parts])
        (out / f"part-{i:02d}.jsonl.zst").write_bytes(zstandard.ZstdCompressor(level=3).compress(chunk))


def digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()


def timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def run_one(name: str, inputs: Path, work: Path, c: int, shuffle_args: dict[str, Any]) -> Any:
    import tokshuf
    import tokshuf.ray as tray

    if name == "preprocess one-node":
        cmd = [sys.executable, "-m", "tokshuf", "preprocess", "--input", str(inputs), "--output-prefix"]
        cmd += [str(work / "one"), "--tokenizer", TOKENIZER, "--workers", str(c), "--progress", "none"]
        return subprocess.run(cmd, check=True, capture_output=True)
    if name == "preprocess ray":
        return tray.preprocess(inputs, work / "ray", TOKENIZER, tasks=c, cpus_per_task=1, progress=False)
    if name == "shuffle one-node":
        return tokshuf.shuffle(
            inputs, work / "c1", work / "s1", TOKENIZER, num_threads=c, progress="none", **shuffle_args
        )
    return tray.shuffle(
        inputs,
        work / "cr",
        work / "sr",
        TOKENIZER,
        cells_tasks=c,
        shards_tasks=c,
        progress=False,
        **shuffle_args,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="200MB")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cpus", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--out", type=Path, default=REPO / "bench-out" / "scaleout")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 20 MB, one round")
    args = ap.parse_args()
    if args.quick:
        args.size, args.rounds = "20MB", 1
    args.out.mkdir(parents=True, exist_ok=True)
    corpus = args.out / f"corpus-{args.size}.jsonl.zst"
    if not corpus.exists():
        subprocess.run([sys.executable, MAKE_CORPUS, corpus, "--size", args.size, "--seed", "0"], check=True)
    inputs = args.out / "inputs"
    if not inputs.exists():
        split_corpus(corpus, inputs, 8)

    import ray

    ray.init(num_cpus=args.cpus, log_to_driver=False)
    # A cluster's workers are up before a job: start this one's (and their imports) untimed.
    warm = args.out / "warm"
    shutil.rmtree(warm, ignore_errors=True)
    warm.mkdir()
    (warm / "in.jsonl").write_text('{"text": "warm up"}\n' * 100)
    import tokshuf.ray as tray

    tray.preprocess(warm / "in.jsonl", warm / "w", TOKENIZER, tasks=args.cpus, progress=False)
    c = args.cpus
    shuffle_args: dict[str, Any] = {"context_length": 2049, "wds_chunk_size": 1024, "num_local_cells": 16}
    best: dict[str, float] = {}
    tokens = 0
    for _ in range(args.rounds):
        work = args.out / "work"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        for name in ("preprocess one-node", "preprocess ray", "shuffle one-node", "shuffle ray"):
            seconds, result = timed(lambda name=name, work=work: run_one(name, inputs, work, c, shuffle_args))
            best[name] = min(best.get(name, seconds), seconds)
            if name == "shuffle one-node":
                tokens = int(result["tokens"])
        pre = [work / f"{p}_text_document.{e}" for p in ("one", "ray") for e in ("bin", "idx")]
        assert digest(pre[:2]) == digest(pre[2:]), "preprocess outputs differ"
        # The datasets: shards and manifest (each run's summary.json records its own timings).
        s1, sr = (sorted(p for p in (work / d).glob("*") if p.name != "summary.json") for d in ("s1", "sr"))
        assert [p.name for p in s1] == [p.name for p in sr], "shard names differ"
        assert digest(s1) == digest(sr), "shards differ"
    ray.shutdown()

    rows = []
    print(f"{'run':<22} {'seconds':>8} {'M tokens/s':>11} {'x one-node':>11}")
    for name, seconds in best.items():
        base = best[name.replace("ray", "one-node")]
        row = {"run": name, "seconds": seconds, "tokens_per_s": tokens / seconds, "ratio": base / seconds}
        rows.append(row)
        print(f"{name:<22} {seconds:>8.2f} {tokens / seconds / 1e6:>11.2f} {base / seconds:>11.2f}")
    (args.out / "results.json").write_text(json.dumps({"size": args.size, "cpus": c, "runs": rows}, indent=2))


if __name__ == "__main__":
    main()
