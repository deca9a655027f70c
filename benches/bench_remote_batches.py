"""Benchmark: Nanoset batches whose ``.bin`` is in object storage, side by side with a local one.

    python benches/bench_remote_batches.py                  # 100M-token .bin, 3 rounds
    python benches/bench_remote_batches.py --quick          # 20M tokens, one round

The dataset is written directly (``IndexedDatasetWriter``, uint16 ids, documents of 20 to 8,000
tokens drawn with a fixed seed) and served from 127.0.0.1 by two servers, each in its own
process on the same cores as the reader:

* ``s3``: moto's S3 server. It copies the whole object to answer each ranged GET (75 ms for a
  40 MB object, measured with boto3), so its samples/s measure moto, not the reader;
* ``http``: nginx (when installed; ``apt install nginx-light``) serving the files, with ETags
  and ranges, through ``http://`` URLs, a server that answers at the speed of S3 or faster.

One train Nanoset (sequence length 2048, Megatron's indices) is built over each of:

* ``local``: the ``.bin`` on local disk, mapped (the reference);
* ``SERVER-ranges``: the ``.bin`` on the server, each batch's token ranges fetched by ranged
  GETs, nearby ranges in one request, 32 requests at once (``remote="ranges"``, the default);
* ``SERVER-copy``: the ``.bin`` downloaded whole into the cache once (``remote="copy"``): its
  first batch waits for the download.

For each, in every round: ``get_batch`` of consecutive global batches of 64 samples (Megatron's
order), samples/s over 20 batches (2 on moto); for ``ranges`` also the requests made and the
bytes they brought per byte the samples hold (distinct bytes of the ``.bin``; goal: <= 1.2), and
for each the time to the first batch from opening. Every batch is checked equal to the local one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
BATCH = 64
SEQ = 2048
#: Batches timed on moto, whose every ranged GET copies the whole object.
S3_BATCHES = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(proc: subprocess.Popen[bytes], port: int) -> bool:
    """Wait up to 10 s for ``proc`` to listen on ``port``; kill it if it does not."""
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.1)
    proc.kill()
    return False


def start_server(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if not listening(proc, port):
        raise RuntimeError("moto server did not start")
    return proc


def start_nginx(root: Path, port: int, work: Path) -> subprocess.Popen[bytes] | None:
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if nginx is None:
        print("nginx not found: no http rows (apt install nginx-light)", file=sys.stderr)
        return None
    conf = work / "nginx.conf"
    user = "user root;" if os.geteuid() == 0 else ""
    conf.write_text(
        f"worker_processes 2; daemon off; {user} pid {work}/nginx.pid; error_log {work}/error.log;\n"
        f"events {{}}\nhttp {{ access_log off; server {{ listen 127.0.0.1:{port}; root {root}; }} }}\n"
    )
    proc = subprocess.Popen([nginx, "-c", str(conf), "-p", str(work)], stderr=subprocess.DEVNULL)
    return proc if listening(proc, port) else None


def write_dataset(prefix: Path, tokens: int) -> None:
    import tokshuf

    rng = np.random.default_rng(0)
    with tokshuf.IndexedDatasetWriter(prefix, dtype=np.uint16) as w:
        left = tokens
        while left > 0:
            n = min(left, int(rng.integers(20, 8000)))
            w.add_document(rng.integers(0, 50_000, n, dtype=np.uint16), [n])
            left -= n


def used_bytes(ds: Any, nanoset: Any, ks: np.ndarray) -> int:
    """Distinct ``.bin`` bytes the samples ``ks`` hold (Megatron's reading rule, from the arrays)."""
    item = ds.dtype.itemsize
    ranges = []
    for k in ks:
        j = int(nanoset.shuffle_index[k])
        (b, bo), (e, eo) = nanoset.sample_index[j], nanoset.sample_index[j + 1]
        for pos in range(int(b), int(e) + 1):
            seq = int(nanoset.document_index[pos])
            start = int(ds.sequence_pointers[seq])
            first = int(bo) if pos == b else 0
            end = int(eo) + 1 if pos == e else int(ds.sequence_lengths[seq])
            ranges.append((start + first * item, start + end * item))
    ranges.sort()
    total, reach = 0, 0
    for s, e in ranges:
        s = max(s, reach)
        if e > s:
            total += e - s
            reach = e
    return total


def run(config: Any, local: Any, batches: int, label: str) -> dict[str, Any]:
    import tokshuf

    t0 = time.perf_counter()
    (train, *_) = tokshuf.build_nanosets(config)
    assert train is not None
    before = tokshuf._core.storage_counters()
    first = train.get_batch(np.arange(BATCH))
    first_s = time.perf_counter() - t0
    n = min(batches, len(train) // BATCH - 1)
    t1 = time.perf_counter()
    out = [train.get_batch(np.arange(b * BATCH, (b + 1) * BATCH)) for b in range(1, n + 1)]
    wall = time.perf_counter() - t1
    requests, fetched = (a - b for a, b in zip(tokshuf._core.storage_counters(), before, strict=True))
    for b, batch in enumerate([first, *out]):
        if not np.array_equal(batch, local.get_batch(np.arange(b * BATCH, (b + 1) * BATCH))):
            raise AssertionError(f"{label}: batch {b} differs from the local one")
    rate = n * BATCH / wall
    return {"samples_per_s": rate, "first_batch_s": first_s, "requests": requests, "bytes": fetched}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=100_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--out", type=Path, default=REPO / "bench-out" / "remote-batches")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 20M tokens, one round")
    args, _ = ap.parse_known_args()
    if args.quick:
        args.tokens, args.rounds = 20_000_000, 1
    args.out.mkdir(parents=True, exist_ok=True)

    import boto3

    import tokshuf

    prefix = args.out / f"ds-{args.tokens}"
    if not Path(f"{prefix}.idx").exists():
        write_dataset(prefix, args.tokens)
    port = free_port()
    servers = [start_server(port)]
    env = {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
    }
    os.environ.update(env)
    urls = {"s3": "s3://bench/ds"}
    work = Path(tempfile.mkdtemp())
    try:
        client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1")
        client.create_bucket(Bucket="bench")
        for ext in ("idx", "bin"):
            client.upload_file(f"{prefix}.{ext}", "bench", f"ds.{ext}")
        http_port = free_port()
        nginx = start_nginx(prefix.parent, http_port, work)
        if nginx is not None:
            servers.append(nginx)
            urls["http"] = f"http://127.0.0.1:{http_port}/{prefix.name}"
        cfg: dict[str, Any] = {"sequence_length": SEQ, "split": "100,0,0"}
        (local, *_) = tokshuf.build_nanosets(tokshuf.NanosetConfig(str(prefix), **cfg))
        ds = tokshuf.IndexedDataset(prefix)
        rows: dict[str, list[dict[str, Any]]] = {"local": []}
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory() as cache:
                os.environ["TOKSHUF_CACHE_DIR"] = cache
                reference = tokshuf.NanosetConfig(str(prefix), **cfg)
                rows["local"].append(run(reference, local, args.batches, "local"))
                for server, url in urls.items():
                    batches = S3_BATCHES if server == "s3" else args.batches
                    for mode in ("ranges", "copy"):
                        config = tokshuf.NanosetConfig(url, remote=mode, **cfg)  # type: ignore[arg-type]
                        rows.setdefault(f"{server}-{mode}", []).append(run(config, local, batches, mode))
        used = {
            n: sum(used_bytes(ds, local, np.arange(b * BATCH, (b + 1) * BATCH)) for b in range(n + 1))
            for n in {args.batches, S3_BATCHES}
        }
    finally:
        for proc in servers:
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)
    best = {k: max(v, key=lambda r: r["samples_per_s"]) for k, v in rows.items()}
    ref = best["local"]["samples_per_s"]
    print(f"{args.tokens:,} tokens, sequence length {SEQ}, batches of {BATCH}, best of {args.rounds} rounds")
    head = ["samples/s", "vs local", "first batch", "requests", "bytes/used"]
    print(f"{'run':12}", *(f"{h:>{w}}" for h, w in zip(head, (10, 9, 12, 9, 11), strict=True)))
    result: dict[str, Any] = {"tokens": args.tokens}
    for name, r in best.items():
        n = S3_BATCHES if name.startswith("s3") else args.batches
        amp = r["bytes"] / used[n] if name.endswith("ranges") else None
        amp_s = f"{amp:11.3f}" if amp is not None else f"{'-':>11}"
        rate, first = r["samples_per_s"], r["first_batch_s"]
        print(f"{name:12} {rate:10.0f} {rate / ref:8.3f}x {first:11.2f}s {r['requests']:9d} {amp_s}")
        result[name] = {**r, "ratio": r["samples_per_s"] / ref, "bytes_per_used": amp}
    (args.out / "results.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
