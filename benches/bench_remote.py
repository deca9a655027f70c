"""Benchmark: preprocess from object storage and from Parquet, side by side with local JSON lines.

    python benches/bench_remote.py                       # 200 MB corpus, 2 threads, 3 rounds
    python benches/bench_remote.py --size 20MB --rounds 1

Corpus: ``tests/fixtures/make_corpus.py OUT --size 200MB --seed 0`` as ``.jsonl.zst``, and the same
documents as a Parquet file (snappy, 20,000 rows per row group, as FineWeb's are cut) written
with pyarrow. The S3 server is moto (``ThreadedMotoServer``) on 127.0.0.1, in this process: a
Python server on the same two cores as the run it serves, so the remote figure is a lower bound.
Runs (``tokshuf preprocess ... --tokenizer tiktoken:cl100k_base --append-eod``, each its own
process, interleaved per round, fastest of the rounds reported; peak RSS from ``wait4``):

* ``local``: the ``.jsonl.zst`` from local disk (the reference);
* ``s3``: the same object from the S3 server (goal: >= 0.8x the local rate, RSS within +25%);
* ``parquet``: the Parquet file from local disk (goal: >= 0.9x the JSON-lines rate);
* ``s3-parquet``: the Parquet file from the S3 server.

Every run's ``.bin/.idx`` is checked byte-equal to the local run's. Rates are text MB/s
(decompressed bytes of the JSON-lines corpus / wall seconds). Results: a table and
``--out/results.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
MAKE_CORPUS = REPO / "tests" / "fixtures" / "make_corpus.py"


def measured(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    """(wall seconds, peak RSS bytes) of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed")
    return wall, usage.ru_maxrss * 1024


def digest(prefix: Path) -> str:
    h = hashlib.sha256()
    for ext in ("bin", "idx"):
        h.update(Path(f"{prefix}_text_document.{ext}").read_bytes())
    return h.hexdigest()


def to_parquet(src: Path, dst: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    with src.open("rb") as f, zstandard.ZstdDecompressor().stream_reader(f) as r:
        texts = [json.loads(line)["text"] for line in r.read().splitlines()]
    pq.write_table(pa.table({"text": texts}), dst, row_group_size=20_000, compression="snappy")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="200MB")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=REPO / "bench-out" / "remote")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 20 MB, one round")
    args = ap.parse_args()
    if args.quick:
        args.size, args.rounds = "20MB", 1
    args.out.mkdir(parents=True, exist_ok=True)

    corpus = args.out / f"corpus-{args.size}.jsonl.zst"
    if not corpus.exists():
        subprocess.run([sys.executable, MAKE_CORPUS, corpus, "--size", args.size, "--seed", "0"], check=True)
    parquet = corpus.with_name(corpus.name.replace(".jsonl.zst", ".parquet"))
    if not parquet.exists():
        to_parquet(corpus, parquet)

    from s3_helpers import S3Server

    server = S3Server()
    try:
        server.bucket("bench")
        server.put("bench", corpus.name, corpus.read_bytes())
        server.put("bench", parquet.name, parquet.read_bytes())
        # Straight to moto, not through the tests' fault proxy.
        env = {**server.env(), "AWS_ENDPOINT_URL": server.server_url}
        inputs = {
            "local": str(corpus),
            "s3": f"s3://bench/{corpus.name}",
            "parquet": str(parquet),
            "s3-parquet": f"s3://bench/{parquet.name}",
        }
        best: dict[str, tuple[float, int]] = {}
        text_bytes = 0
        for _ in range(args.rounds):
            for name, source in inputs.items():
                prefix = args.out / f"out-{name}"
                cmd = [sys.executable, "-m", "tokshuf", "preprocess", "--input", source]
                cmd += ["--output-prefix", str(prefix), "--tokenizer", "tiktoken:cl100k_base", "--append-eod"]
                cmd += ["--workers", str(args.threads), "--progress", "none"]
                wall, rss = measured(cmd, env)
                if name == "local":
                    text_bytes = json.loads(Path(f"{prefix}_summary.json").read_text())["decompressed_bytes"]
                if name not in best or wall < best[name][0]:
                    best[name] = (wall, max(rss, best.get(name, (0, 0))[1]))
        reference = digest(args.out / "out-local")
        for name in inputs:
            assert digest(args.out / f"out-{name}") == reference, f"{name}: outputs differ from the local run"
    finally:
        server.stop()

    base_wall, base_rss = best["local"]
    rows = []
    print(f"{'run':<12} {'text MB/s':>10} {'x local':>8} {'peak RSS MB':>12} {'RSS x local':>12}")
    for name, (wall, rss) in best.items():
        rate = text_bytes / wall / 1e6
        row = {"run": name, "seconds": wall, "text_mb_s": rate, "ratio": base_wall / wall, "peak_rss": rss}
        row["rss_ratio"] = rss / base_rss
        rows.append(row)
        print(
            f"{name:<12} {rate:>10.1f} {base_wall / wall:>8.2f} {rss / 2**20:>12.0f} {rss / base_rss:>12.2f}"
        )
    (args.out / "results.json").write_text(
        json.dumps({"size": args.size, "threads": args.threads, "runs": rows})
    )


if __name__ == "__main__":
    main()
