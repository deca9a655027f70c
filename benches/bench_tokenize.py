"""Tokenization throughput: tokshuf's fast BPE vs tiktoken vs fastokens, side by side in one run.

Each (library, encoding, thread count) runs in its own subprocess (peak RSS per run; fastokens
sizes its pool from the environment at import) over the same texts, loaded before timing. Every
pass builds a fresh tokenizer outside the timed part, so the figures are cold-cache, and the
median pass is reported. MB = 10^6 bytes of UTF-8 text. A separate, untimed pass per library
compares every document's ids with tiktoken's ``encode_ordinary`` (per-document digests).

    python benches/bench_tokenize.py --size 200MB                      # the issue's corpus
    python benches/bench_tokenize.py --size 20MB --seed 7 --mix prose=0.2,code=0.2,i18n=0.6
    python benches/bench_tokenize.py --corpus my.jsonl.zst --encodings cl100k_base --threads 2

The corpus is generated with ``tests/fixtures/make_corpus.py`` (the benchmark corpus generator)
into ``--cache-dir`` unless ``--corpus`` is given; ``--quick`` is a 5 MB smoke run. fastokens
is optional (``pip install fastokens``; never a dependency).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MAKE_CORPUS = ROOT / "tests" / "fixtures" / "make_corpus.py"
GPT2_JSON = ROOT / "tests" / "fixtures" / "gpt2" / "tokenizer.json"
BATCH = 1000


# --- corpus ------------------------------------------------------------------------------------


def make_corpus(size: str, seed: int, mix: str | None, cache_dir: Path) -> Path:
    name = f"corpus-{size}-s{seed}" + (f"-{hashlib.sha1(mix.encode()).hexdigest()[:8]}" if mix else "")
    path = cache_dir / f"{name}.jsonl.zst"
    if not path.exists():
        generator = MAKE_CORPUS
        cache_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, str(generator), str(path), "--size", size, "--seed", str(seed)]
        if mix:
            cmd += ["--mix", mix]
        subprocess.run(cmd, check=True)
    return path


def read_texts(path: Path) -> list[str]:
    data = path.read_bytes()
    if path.suffix == ".zst":
        import zstandard

        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
    elif path.suffix == ".gz":
        import gzip

        data = gzip.decompress(data)
    texts = []
    for line in data.decode("utf-8").splitlines():
        value = json.loads(line).get("text") if line.strip() else None
        if isinstance(value, str):
            texts.append(value)
    return texts


def batches(texts: list[str]) -> Iterator[list[str]]:
    for i in range(0, len(texts), BATCH):
        yield texts[i : i + BATCH]


# --- libraries ---------------------------------------------------------------------------------


def tiktoken_files(tmp: Path) -> dict[str, Path]:
    """The OpenAI `.tiktoken` files, rebuilt from the ranks embedded in tokshuf and checked against
    the sha256 tiktoken pins (no download, no ../shared needed)."""
    from tokshuf._core import BpeEncoder

    out = {}
    for name in ("r50k_base", "cl100k_base", "o200k_base"):
        path = tmp / f"{name}.tiktoken"
        if not path.exists():
            ranks = sorted(BpeEncoder.from_tiktoken(name).mergeable_ranks().items(), key=lambda kv: kv[1])
            path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in ranks))
        out[name] = path
    return out


def tiktoken_encoding(name: str, files: dict[str, Path]) -> Any:
    import tiktoken
    import tiktoken.load
    from tiktoken_ext import openai_public

    def read(blobpath: str, expected_hash: str | None = None) -> bytes:
        data = files[blobpath.rsplit("/", 1)[-1].removesuffix(".tiktoken")].read_bytes()
        if expected_hash and hashlib.sha256(data).hexdigest() != expected_hash:
            raise ValueError(f"{blobpath}: sha256 differs from tiktoken's pinned hash")
        return data

    saved = tiktoken.load.read_file_cached
    tiktoken.load.read_file_cached = read
    try:
        return tiktoken.Encoding(**openai_public.ENCODING_CONSTRUCTORS[name]())
    finally:
        tiktoken.load.read_file_cached = saved


Encoder = Callable[[list[str]], list[Any]]  # a batch -> per-document id arrays (or counts)


def make_encoder(lib: str, name: str, threads: int, files: dict[str, Path]) -> Callable[[], Encoder]:
    """A factory of fresh encoders (cold caches) for one library."""
    import numpy as np

    if lib == "tokshuf":
        from tokshuf._core import BpeEncoder

        def tokshuf_factory() -> Encoder:
            enc = BpeEncoder.from_tiktoken(name)

            def run(batch: list[str]) -> list[Any]:
                ids_buf, off_buf = enc.encode_batch(batch, threads=threads)
                ids = np.frombuffer(ids_buf, np.uint32)
                off = np.frombuffer(off_buf, np.uint64)
                return [ids[off[i] : off[i + 1]] for i in range(len(batch))]

            return run

        return tokshuf_factory
    if lib == "tiktoken":

        def tiktoken_factory() -> Encoder:
            enc = tiktoken_encoding(name, files)
            return lambda batch: enc.encode_ordinary_batch(batch, num_threads=threads)

        return tiktoken_factory
    if lib == "fastokens":
        import fastokens

        def fastokens_factory() -> Encoder:
            if name == "r50k_base":
                tok = fastokens.Tokenizer.from_file(str(GPT2_JSON))
            else:
                tok = fastokens.Tokenizer.from_tiktoken(str(files[name]), encoding=name)

            def run(batch: list[str]) -> list[Any]:
                ids_buf, off_buf = tok.encode_batch_flat(batch, split_special_tokens=True)
                ids, offsets = np.frombuffer(ids_buf, np.uint32), np.frombuffer(off_buf, np.uint64)
                return [ids[offsets[i] : offsets[i + 1]] for i in range(len(batch))]

            return run

        return fastokens_factory
    raise SystemExit(f"unknown library {lib!r} (expected tokshuf, tiktoken, fastokens)")


def digest(ids: Any) -> bytes:
    import numpy as np

    return hashlib.blake2b(np.asarray(ids, dtype=np.uint32).tobytes(), digest_size=16).digest()


# --- one measurement (subprocess) --------------------------------------------------------------


def worker(args: argparse.Namespace) -> None:
    if args.threads == 1 and hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, cpus[:1])  # libraries with their own pools stay on one core
    texts = read_texts(Path(args.corpus))
    mb = sum(len(t.encode()) for t in texts) / 1e6
    files = tiktoken_files(Path(args.tmp))
    factory = make_encoder(args.lib, args.encoding, args.threads, files)
    result: dict[str, Any] = {"lib": args.lib, "encoding": args.encoding, "threads": args.threads, "mb": mb}
    if args.check:
        enc = factory()
        result["digests"] = [digest(ids).hex() for b in batches(texts) for ids in enc(b)]
    else:
        times, cpu, tokens = [], [], 0
        for _ in range(args.passes):
            enc = factory()
            t0, c0 = time.perf_counter(), time.process_time()
            tokens = 0
            for b in batches(texts):
                tokens += sum(len(ids) for ids in enc(b))
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        median = statistics.median(times)
        result.update(
            seconds=times,
            mb_s=mb / median,
            mtok_s=tokens / median / 1e6,
            cpu_pct=100 * statistics.median(cpu) / median,
            tokens=tokens,
        )
    import resource

    result["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KiB on Linux
    print(json.dumps(result))


def run_worker(
    args: argparse.Namespace, lib: str, encoding: str, threads: int, check: bool
) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        "--corpus",
        str(args.corpus),
        "--tmp",
        str(args.tmp),
        "--lib",
        lib,
        "--encoding",
        encoding,
        "--threads",
        str(threads),
        "--passes",
        str(args.passes),
    ]
    if check:
        cmd.append("--check")
    env = dict(os.environ, FASTOKENS_BPE_THREADS=str(threads), RAYON_NUM_THREADS=str(threads))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, check=False)
    if proc.returncode:
        return {"lib": lib, "encoding": encoding, "threads": threads, "error": f"exit {proc.returncode}"}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def available(lib: str) -> bool:
    try:
        __import__(lib)
    except ImportError:
        return False
    return True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", type=Path, help="a JSON-lines corpus with a 'text' key (.jsonl, .gz, .zst)")
    p.add_argument("--size", default="200MB", help="make_corpus.py --size when no --corpus is given")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mix", default=None, help="make_corpus.py --mix")
    p.add_argument("--cache-dir", type=Path, default=ROOT / "bench-out")
    p.add_argument("--encodings", default="r50k_base,cl100k_base")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--libs", default="tokshuf,tiktoken,fastokens")
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--no-check", action="store_true", help="skip the ids comparison")
    p.add_argument("--json", type=Path, help="also write the results as JSON lines here")
    p.add_argument("--quick", action="store_true", help="a 5 MB corpus and one pass (unless given)")
    # internal: one measurement
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--lib", help=argparse.SUPPRESS)
    p.add_argument("--encoding", help=argparse.SUPPRESS)
    p.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--tmp", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        args.threads = int(args.threads)
        worker(args)
        return

    if args.quick:
        if "--size" not in sys.argv:
            args.size = "5MB"
        if "--passes" not in sys.argv:
            args.passes = 1
    if args.corpus is None:
        args.corpus = make_corpus(args.size, args.seed, args.mix, args.cache_dir)
    libs = [lib for lib in args.libs.split(",") if available(lib)]
    missing = sorted(set(args.libs.split(",")) - set(libs))
    encodings = args.encodings.split(",")
    thread_counts = [int(t) for t in args.threads.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        args.tmp = tmp
        uptime = os.getloadavg() if hasattr(os, "getloadavg") else ()
        print(
            f"corpus {args.corpus}; libraries {', '.join(libs)}"
            + (f" (not installed: {', '.join(missing)})" if missing else "")
            + f"; load average {', '.join(f'{x:.2f}' for x in uptime)}"
        )
        results = []
        for encoding in encodings:
            for threads in thread_counts:
                for lib in libs:
                    results.append(run_worker(args, lib, encoding, threads, check=False))
            if not args.no_check and "tiktoken" in libs:
                ref = run_worker(args, "tiktoken", encoding, 2, check=True)["digests"]
                for lib in libs:
                    if lib != "tiktoken":
                        got = run_worker(args, lib, encoding, 2, check=True)
                        bad = sum(a != b for a, b in zip(got.get("digests", []), ref, strict=False))
                        bad += abs(len(got.get("digests", [])) - len(ref))
                        for r in results:
                            if r["lib"] == lib and r["encoding"] == encoding:
                                r["mismatching_docs"] = bad
                                r["docs"] = len(ref)
    print_table(results)
    if args.json:
        with args.json.open("a") as f:
            for r in results:
                f.write(json.dumps({k: v for k, v in r.items() if k != "digests"}) + "\n")


def print_table(results: list[dict[str, Any]]) -> None:
    by_key = {(r["lib"], r["encoding"], r["threads"]): r for r in results}
    header = (
        "library",
        "encoding",
        "thr",
        "MB/s",
        "Mtok/s",
        "CPU%",
        "peak RSS GB",
        "x tiktoken",
        "x fastokens",
        "mismatching docs",
    )
    rows = []
    for r in results:
        if "error" in r:
            rows.append((r["lib"], r["encoding"], str(r["threads"]), r["error"], "", "", "", "", "", ""))
            continue

        def ratio(peer: str, r: dict[str, Any] = r) -> str:
            other = by_key.get((peer, r["encoding"], r["threads"]))
            return f"{r['mb_s'] / other['mb_s']:.2f}" if other and "mb_s" in other else "-"

        rows.append(
            (
                r["lib"],
                r["encoding"],
                str(r["threads"]),
                f"{r['mb_s']:.1f}",
                f"{r['mtok_s']:.1f}",
                f"{r['cpu_pct']:.0f}",
                f"{r.get('peak_rss_gb', 0):.2f}",
                ratio("tiktoken"),
                ratio("fastokens"),
                f"{r['mismatching_docs']} / {r['docs']}" if "docs" in r else "-",
            )
        )
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    for row in [header, *rows]:
        print("  ".join(str(x).rjust(w) for x, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
