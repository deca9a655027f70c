"""`tokshuf shuffle` end to end, beside `tokshuf preprocess` on the same input.

    python benches/bench_shuffle.py [--sizes 200MB,2GB | --quick] [--tokenizer tiktoken:r50k_base]
                                    [--threads N] [--repeat 3] [--workdir bench-out/shuffle]
                                    [--make-corpus PATH]

For every size: generate the corpus once (`../shared/bench/make_corpus.py`, .jsonl.zst, seed 0,
cached in the workdir), run `preprocess` (--append-eod) and `shuffle` (defaults) in fresh
processes, alternately `--repeat` times (the fastest run of each counts), and measure the
disk's sequential write bandwidth (buffered write + fdatasync, like the shard writer). Prints
one JSON line per size and a summary line with the issue's targets:

* shuffle tokens/s >= 90% of preprocess tokens/s;
* peak RSS of shuffle independent of corpus size (within 10% between sizes) and < 1 GB;
* stage 2 writes at >= 50% of the disk's sequential write bandwidth;
* stage 1 alone (`stage="cells"`, one task, `npy` members: no gzip) costs at most 10% more CPU
  time than `preprocess` on the same input, tokenizer and threads (the same reader, tokenizing and
  buffers; only the writing differs).

Tokens/s compares like with like only with a real BPE tokenizer (the default): with `byte`,
tokenization costs nothing and the comparison measures JSON + gzip encoding against writing raw ids.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# Runs in a fresh interpreter so that its peak RSS is the tool's alone.
DRIVER = """
import json, resource, sys, time
import tokshuf
kind, args = sys.argv[1], json.loads(sys.argv[2])
t = time.perf_counter()
if kind == "preprocess":
    s = tokshuf.preprocess(**args)
    tokens = s["outputs"][0]["tokens"]
elif kind == "stage1":
    s = tokshuf.shuffle(**args)
    tokens = 0
else:
    s = tokshuf.shuffle(**args)
    tokens = s["tokens"]
seconds = time.perf_counter() - t
use = resource.getrusage(resource.RUSAGE_SELF)
rss, cpu = use.ru_maxrss * 1024, use.ru_utime + use.ru_stime
print(json.dumps({"seconds": seconds, "cpu": cpu, "tokens": tokens, "peak_rss": rss, "summary": s}))
"""


def default_make_corpus() -> Path:
    """`shared/bench/make_corpus.py` beside the checkout (CI) or beside its parent (worktrees)."""
    for base in (ROOT.parent, ROOT.parent.parent):
        candidate = base / "shared" / "bench" / "make_corpus.py"
        if candidate.exists():
            return candidate
    return ROOT.parent / "shared" / "bench" / "make_corpus.py"


def run_driver(kind: str, args: dict[str, Any]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, kind, json.dumps(args)], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def corpus(workdir: Path, size: str, make_corpus: Path) -> Path:
    path = workdir / f"corpus-{size}.jsonl.zst"
    if not path.exists():
        cmd = [sys.executable, str(make_corpus), str(path), "--size", size, "--seed", "0", "--quiet"]
        subprocess.run(cmd, check=True)
    return path


def disk_write_bandwidth(workdir: Path, megabytes: int = 1024) -> float:
    """Bytes/s of a buffered sequential write ended by fdatasync (dd conv=fdatasync)."""
    target = workdir / "dd.bin"
    block = b"\0" * (16 << 20)
    t = time.perf_counter()
    with open(target, "wb") as f:
        for _ in range(megabytes // 16):
            f.write(block)
        f.flush()
        os.fdatasync(f.fileno())
    seconds = time.perf_counter() - t
    target.unlink()
    return megabytes * (1 << 20) / seconds


def bench_size(size: str, args: argparse.Namespace, workdir: Path, make_corpus: Path) -> dict[str, Any]:
    src = corpus(workdir, size, make_corpus)
    run_dir = workdir / f"run-{size}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    pre_args = {
        "inputs": [str(src)],
        "output_prefix": str(run_dir / "pre"),
        "tokenizer": args.tokenizer,
        "json_keys": ["text"],
        "append_eod": True,
        "num_threads": args.threads,
    }
    shuf_args = {
        "inputs": [str(src)],
        "local_cell_dir": str(run_dir / "cells"),
        "output": str(run_dir / "out"),
        "tokenizer": args.tokenizer,
        "num_threads": args.threads,
        "progress": "none",
    }
    stage1_args = {**shuf_args, "member_format": "npy", "stage": "cells", "task": "0/1"}
    # Alternate them and keep each one's fastest run: on a shared machine a single pair can
    # differ by 20% from one minute to the next.
    pres, shufs, stage1s = [], [], []
    for _ in range(args.repeat):
        for kind, kargs, runs in (
            ("preprocess", pre_args, pres),
            ("shuffle", shuf_args, shufs),
            ("stage1", stage1_args, stage1s),
        ):
            runs.append(run_driver(kind, kargs))
            shutil.rmtree(run_dir, ignore_errors=True)
            run_dir.mkdir(parents=True)
    pre = min(pres, key=lambda r: r["seconds"])
    shuf = min(shufs, key=lambda r: r["seconds"])
    stage1_cpu = min(r["cpu"] for r in stage1s)
    pre_cpu = min(r["cpu"] for r in pres)
    s = shuf["summary"]
    disk = disk_write_bandwidth(workdir)
    shutil.rmtree(run_dir, ignore_errors=True)
    return {
        "bench": "shuffle",
        "size": size,
        "input_bytes": src.stat().st_size,
        "tokenizer": args.tokenizer,
        "threads": args.threads,
        "preprocess_s": round(pre["seconds"], 3),
        "preprocess_tok_s": round(pre["tokens"] / pre["seconds"]),
        "preprocess_peak_rss_mb": round(max(r["peak_rss"] for r in pres) / 1e6, 1),
        "preprocess_cpu_s": round(pre["cpu"], 2),
        "shuffle_s": round(shuf["seconds"], 3),
        "shuffle_tok_s": round(shuf["tokens"] / shuf["seconds"]),
        "shuffle_vs_preprocess": round(
            (shuf["tokens"] / shuf["seconds"]) / (pre["tokens"] / pre["seconds"]), 3
        ),
        "shuffle_peak_rss_mb": round(max(r["peak_rss"] for r in shufs) / 1e6, 1),
        "shuffle_cpu_s": round(shuf["cpu"], 2),
        "stage1_npy_cpu_s": round(stage1_cpu, 2),
        "stage1_cpu_vs_preprocess": round(stage1_cpu / pre_cpu, 3),
        "runs": args.repeat,
        "stage1_s": round(s["stage1_seconds"], 3),
        "stage2_s": round(s["stage2_seconds"], 3),
        "contexts": s["contexts"],
        "shards": s["shards"],
        "output_mb": round(s["output_bytes"] / 1e6, 1),
        "bytes_per_token": round(s["output_bytes"] / max(s["tokens"] + s["pad_tokens"], 1), 3),
        "stage2_write_mb_s": round(s["output_bytes"] / s["stage2_seconds"] / 1e6, 1),
        "stage2_moved_mb_s": round((s["output_bytes"] + s["cell_bytes"]) / s["stage2_seconds"] / 1e6, 1),
        "disk_write_mb_s": round(disk / 1e6, 1),
        "stage2_vs_disk": round(s["output_bytes"] / s["stage2_seconds"] / disk, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="200MB,2GB", help="corpus sizes (make_corpus.py --size)")
    ap.add_argument("--quick", action="store_true", help="sizes 20MB,200MB (a check that it runs)")
    ap.add_argument("--tokenizer", default="tiktoken:r50k_base")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each, alternated; the fastest counts")
    ap.add_argument("--workdir", type=Path, default=ROOT / "bench-out" / "shuffle")
    ap.add_argument("--make-corpus", type=Path, default=default_make_corpus())
    args = ap.parse_args()
    if args.quick:
        args.sizes = "20MB,200MB"
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for size in args.sizes.split(","):
        row = bench_size(size, args, args.workdir, args.make_corpus)
        print(json.dumps(row), flush=True)
        rows.append(row)
    rss = [r["shuffle_peak_rss_mb"] for r in rows]
    print(
        json.dumps(
            {
                "bench": "shuffle-targets",
                "tok_s_ratio_min (>= 0.9)": min(r["shuffle_vs_preprocess"] for r in rows),
                "peak_rss_spread (<= 0.1)": round(max(rss) / min(rss) - 1, 3),
                "peak_rss_max_mb (< 1000)": max(rss),
                "stage2_vs_disk_min (>= 0.5)": min(r["stage2_vs_disk"] for r in rows),
                "stage1_cpu_vs_preprocess_max (<= 1.1)": max(r["stage1_cpu_vs_preprocess"] for r in rows),
            }
        )
    )


if __name__ == "__main__":
    main()
