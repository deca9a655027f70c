"""The write path's cost of commit records (CRC32C of every member, summed as it is written, and the
record itself): preprocess and shuffle on the 200 MB corpus, this build against a build without them.

    python benches/bench_commit.py --baseline /path/to/base/python    # A/B against another build
    python benches/bench_commit.py                                    # this build's times only

Corpus: ``tests/fixtures/make_corpus.py OUT --size 200MB --seed 0`` (offline, deterministic).
Jobs (2 threads): ``preprocess`` with the byte tokenizer (the worst case: no tokenizing cost to hide
behind, and the largest output, 2 bytes of ``.bin`` per input byte), ``preprocess`` with
``tiktoken:cl100k_base``, and ``shuffle`` with the byte tokenizer (context length 2049). With
``--baseline`` (the ``python/`` directory of a build without records, e.g. the commit before them),
each round runs every job ``--repeat`` times in one process per build, the builds one after the
other; a round's figure is the fastest run of each build (CPU time, user + sys, and wall time), and
the result is the median over ``--rounds`` of the ratio after / before. A shared VM drifts by tens
of percent from minute to minute: the fastest of several runs, interleaved, is what survives that.
Prints a table and one JSON line (``--json PATH`` keeps it). The figures the docs quote are in
``commit_cost.json`` beside this file: the checksum's cost, measured against the same build with the
CRC32C update compiled out (``--baseline``), which isolates it from every other change.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MAKE_CORPUS = REPO / "tests" / "fixtures" / "make_corpus.py"

#: One process per build and round: the job run ``repeat`` times, the fastest CPU and wall printed.
RUNNER = """
import os, pathlib, shutil, sys, time, tokshuf
data, work, job, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
opts = dict(num_threads=2, progress="none")
runs = []
for _ in range(repeat):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    cpu, wall = time.process_time(), time.perf_counter()
    if job == "preprocess byte":
        tokshuf.preprocess(data, work + "/p", "byte", append_eod=True, **opts)
    elif job == "preprocess cl100k":
        tokshuf.preprocess(data, work + "/p", "tiktoken:cl100k_base", append_eod=True, **opts)
    else:
        tokshuf.shuffle(data, work + "/cells", work + "/out", "byte", context_length=2049, **opts)
    runs.append((time.process_time() - cpu, time.perf_counter() - wall))
written = sum(p.stat().st_size for p in pathlib.Path(work).rglob("*") if p.is_file())
print(min(c for c, _ in runs), min(w for _, w in runs), written)
"""

JOBS = ("preprocess byte", "preprocess cl100k", "shuffle byte")


def corpus(out_dir: Path, size: str, seed: int) -> Path:
    path = out_dir / f"corpus-{size}-seed{seed}.jsonl"
    if not Path(f"{path}.manifest.json").exists():
        print(f"generating {path} ...", file=sys.stderr)
        cmd = [sys.executable, str(MAKE_CORPUS), str(path), "--size", size, "--seed", str(seed)]
        subprocess.run(cmd, check=True)
    return path


def run(job: str, python_dir: Path, data: Path, work: Path, repeat: int) -> tuple[float, float, int]:
    """The fastest CPU and wall seconds of ``repeat`` runs of ``job`` with the build at
    ``python_dir``, and the bytes the job wrote."""
    env = {**os.environ, "PYTHONPATH": str(python_dir)}
    out = subprocess.run(
        [sys.executable, "-c", RUNNER, str(data), str(work), job, str(repeat)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    shutil.rmtree(work, ignore_errors=True)
    return float(out[0]), float(out[1]), int(out[2])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, help="python/ dir of a build without commit records")
    ap.add_argument("--build", type=Path, default=REPO / "python", help="python/ dir of the build measured")
    ap.add_argument("--size", default="200MB")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--jobs", nargs="+", default=list(JOBS), choices=list(JOBS))
    ap.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "tokshuf-bench")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--quick", action="store_true", help="20MB, one round of one run: a check that it runs")
    args = ap.parse_args()
    if args.quick:
        args.size, args.rounds, args.repeat = "20MB", 1, 1
    args.data_dir.mkdir(parents=True, exist_ok=True)
    data = corpus(args.data_dir, args.size, args.seed)
    this = args.build
    work = args.data_dir / "work"
    results: dict[str, Any] = {"bench": "commit", "corpus": args.size}
    results.update(rounds=args.rounds, repeat=args.repeat)
    for job in args.jobs:
        rounds: list[dict[str, Any]] = []
        for _ in range(args.rounds if args.baseline else 1):
            row: dict[str, Any] = {}
            if args.baseline:
                row["before"] = run(job, args.baseline, data, work, args.repeat)
            row["after"] = run(job, this, data, work, args.repeat)
            rounds.append(row)
        after = [r["after"] for r in rounds]
        entry: dict[str, Any] = {
            "written_mb": round(after[0][2] / 1e6, 1),
            "after_cpu_s": [round(a[0], 3) for a in after],
            "after_wall_s": [round(a[1], 3) for a in after],
        }
        line = f"{job:18s} wrote {after[0][2] / 1e6:6.1f} MB in {min(a[1] for a in after):.2f} s"
        if args.baseline:
            before = [r["before"] for r in rounds]
            entry["before_cpu_s"] = [round(b[0], 3) for b in before]
            entry["before_wall_s"] = [round(b[1], 3) for b in before]
            entry["cpu_ratio"] = statistics.median(a[0] / b[0] for a, b in zip(after, before, strict=True))
            entry["wall_ratio"] = statistics.median(a[1] / b[1] for a, b in zip(after, before, strict=True))
            line += f"; after / before: CPU x{entry['cpu_ratio']:.3f}, wall x{entry['wall_ratio']:.3f}"
        results[job] = entry
        print(line, flush=True)
    print(json.dumps(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
