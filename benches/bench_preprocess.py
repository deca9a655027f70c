"""Benchmark: `tokshuf preprocess` against Megatron-LM's `preprocess_data.py`, side by side in one run.

    python benches/bench_preprocess.py                      # 200 MB corpus, 1 and 2 threads
    python benches/bench_preprocess.py --size 10MB --quick  # a smoke run
    python benches/bench_preprocess.py --megatron-lm ~/Megatron-LM --megatron-python ~/mvenv/bin/python

Corpus: ``tests/fixtures/make_corpus.py OUT --size 200MB --seed 0`` (offline, deterministic).
For each thread count:

* tokshuf, ``.jsonl.zst`` → ``.bin/.idx`` end to end (read, decompress, parse, tokenize, write,
  sync), ``--append-eod``: GPT-2 (``tokenizer.json``), ``tiktoken:r50k_base`` (same ids),
  ``tiktoken:cl100k_base``; "threads" are tokenizing workers, and the reader and writer threads
  run beside them (at one thread, on the second core: CPU% above 100);
* Megatron-LM ``tools/preprocess_data.py`` (HuggingFaceTokenizer, GPT-2), when a checkout is given:
  ``git archive core_v0.16.1 tools megatron/training megatron/legacy`` of NVIDIA/Megatron-LM into
  DIR, ``megatron/training/__init__.py`` replaced by a stub (``def __getattr__(name): return lambda
  *a, **k: None``), and a Python with ``megatron-core==0.16.1 transformers`` installed.

The tokenizer libraries (fastokens, tiktoken, HF ``tokenizers``, ...) beside ``preprocess``, with
their ids checked per document, are in ``bench_peers.py``.

Each run is its own process: peak RSS is that process's (``wait4``), CPU% = (user + sys) / wall.
A shared 2-core VM runs the same job 20-40% slower or faster from one minute to the next, so the
tokshuf runs are repeated ``--rounds`` times, interleaved, and the fastest of each is reported
(the spread is printed too). Megatron's ``.bin/.idx`` must be byte-equal to tokshuf's, and every
round's ids the same. Results: a table on stdout and ``--out/results.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MAKE_CORPUS = REPO / "tests" / "fixtures" / "make_corpus.py"
GPT2 = REPO / "tests" / "fixtures" / "gpt2"


@dataclass
class Result:
    name: str
    threads: int
    seconds: float
    wall: float
    peak_rss: int
    cpu: float
    tokens: int
    text_bytes: int
    jsonl_bytes: int | None = None
    ids_sha256: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def text_mb_s(self) -> float:
        return self.text_bytes / self.seconds / 1e6

    @property
    def mtok_s(self) -> float:
        return self.tokens / self.seconds / 1e6


def measured(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int, float, str]:
    """(wall seconds, peak RSS bytes, CPU seconds, stdout) of one child process."""
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-{os.getpid()}.out"
    with open(out, "w+") as f:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=f, env={**os.environ, **(env or {})})
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        f.seek(0)
        stdout = f.read()
    out.unlink()
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:4]}... exited with {proc.returncode}")
    return wall, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime, stdout


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            h.update(chunk)
    return h.hexdigest()


def make_corpus(out_dir: Path, size: str, seed: int) -> tuple[Path, dict[str, Any]]:
    path = out_dir / f"corpus-{size}-seed{seed}.jsonl"
    manifest_path = Path(f"{path}.manifest.json")
    if not manifest_path.exists():
        print(f"generating {path} ...", file=sys.stderr)
        cmd = [sys.executable, str(MAKE_CORPUS), str(path), "--size", size, "--seed", str(seed)]
        subprocess.run(cmd, check=True)
    manifest: dict[str, Any] = json.loads(manifest_path.read_text())
    return path, manifest


def run_tokshuf(corpus: Path, out: Path, name: str, spec: str, threads: int, text_bytes: int) -> Result:
    """``threads`` tokenizing workers; the reader and writer threads run beside them."""
    prefix = out / f"tokshuf-{name}-{threads}"
    summary = Path(f"{prefix}.json")
    cmd = [
        sys.executable,
        "-m",
        "tokshuf",
        "preprocess",
        "--input",
        str(corpus),
        "--output-prefix",
        str(prefix),
    ]
    cmd += [
        "--tokenizer",
        spec,
        "--append-eod",
        "--workers",
        str(threads),
        "--quiet",
        "--summary",
        str(summary),
    ]
    wall, rss, cpu, _ = measured(cmd, {"TOKSHUF_NUM_THREADS": str(threads)})
    s = json.loads(summary.read_text())
    bin_path = Path(f"{prefix}_text_document.bin")
    tokens = s["tokens"] - _non_empty_documents(Path(f"{prefix}_text_document.idx"))  # without eods
    result = Result(
        f"tokshuf {name}",
        threads,
        s["seconds"],
        wall,
        rss,
        cpu / wall,
        tokens,
        text_bytes,
        jsonl_bytes=s["decompressed_bytes"],
        ids_sha256=sha256(bin_path),
        extra={"idx_sha256": sha256(Path(f"{prefix}_text_document.idx"))},
    )
    bin_path.unlink()
    return result


def _non_empty_documents(idx: Path) -> int:
    """Documents with at least one sequence (each got one eod), from the .idx header arrays."""
    import numpy as np

    b = idx.read_bytes()
    s, d = np.frombuffer(b, "<u8", 2, 18)
    docs = np.frombuffer(b, "<i8", int(d), 34 + 12 * int(s))
    return int((np.diff(docs) > 0).sum())


def run_megatron(
    corpus: Path, out: Path, checkout: Path, python: str, workers: int, text_bytes: int, tokens: int
) -> Result:
    prefix = out / f"megatron-{workers}"
    cmd = [python, str(checkout / "tools" / "preprocess_data.py"), "--input", str(corpus)]
    cmd += ["--output-prefix", str(prefix), "--tokenizer-type", "HuggingFaceTokenizer"]
    cmd += ["--tokenizer-model", str(GPT2), "--workers", str(workers), "--append-eod"]
    cmd += ["--log-interval", "1000000000"]
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    wall, rss, cpu, _ = measured(cmd, env)
    bin_path = Path(f"{prefix}_text_document.bin")
    result = Result(
        "Megatron preprocess_data.py gpt2 (HF)", workers, wall, wall, rss, cpu / wall, tokens, text_bytes,
        jsonl_bytes=corpus.stat().st_size, ids_sha256=sha256(bin_path),
        extra={"idx_sha256": sha256(Path(f"{prefix}_text_document.idx"))},
    )  # fmt: skip
    bin_path.unlink()
    return result


def compressed(corpus: Path) -> Path:
    """``corpus`` compressed with zstd (level 3, as ``zstd`` writes by default), made once."""
    zst = Path(f"{corpus}.zst")
    if not zst.exists():
        import zstandard

        tmp = Path(f"{zst}.tmp")
        with open(corpus, "rb") as src, open(tmp, "wb") as dst:
            zstandard.ZstdCompressor(level=3).copy_stream(src, dst)
        tmp.rename(zst)
    return zst


def best_of(rounds: list[Result]) -> Result:
    """The fastest of repeated runs, with every round's seconds and the highest peak RSS."""
    best = min(rounds, key=lambda r: r.seconds)
    best.extra["seconds_all"] = [round(r.seconds, 3) for r in rounds]
    best.peak_rss = max(r.peak_rss for r in rounds)
    return best


def seconds(r: Result) -> str:
    rounds = r.extra.get("seconds_all", [])
    return f"{r.seconds:.2f}" + (f" ({', '.join(f'{x:.2f}' for x in rounds)})" if len(rounds) > 1 else "")


def table(results: list[Result]) -> str:
    head = "| run | threads | s (best; all rounds) | JSONL MB/s | text MB/s | Mtok/s | peak RSS MB | CPU% |"
    rows = [head, "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        jsonl = f"{r.jsonl_bytes / r.seconds / 1e6:.2f}" if r.jsonl_bytes else "—"
        rows.append(
            f"| {r.name} | {r.threads} | {seconds(r)} | {jsonl} | {r.text_mb_s:.2f} | {r.mtok_s:.2f} "
            f"| {r.peak_rss / 1e6:.0f} | {100 * r.cpu:.0f} |"
        )
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="200MB", help="corpus size (make_corpus.py --size)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--out", type=Path, default=REPO / "bench-out" / "preprocess")
    ap.add_argument("--megatron-lm", type=Path, default=os.environ.get("MEGATRON_LM"))
    ap.add_argument("--megatron-python", default=os.environ.get("MEGATRON_PYTHON", sys.executable))
    ap.add_argument("--quick", action="store_true", help="a 10 MB corpus (unless --size is given)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved repeats of the tokshuf runs (best of)")
    args = ap.parse_args()
    if args.quick and "--size" not in sys.argv:
        args.size = "10MB"
    args.out.mkdir(parents=True, exist_ok=True)
    corpus, manifest = make_corpus(args.out, args.size, args.seed)
    with open(corpus, encoding="utf-8") as f:
        text_bytes = sum(len(json.loads(line)["text"].encode("utf-8")) for line in f)
    print(
        f"corpus {corpus.name}: {manifest['documents']:,} documents, "
        f"{corpus.stat().st_size / 1e6:.1f} MB JSONL, {text_bytes / 1e6:.1f} MB text",
        file=sys.stderr,
    )

    results: list[Result] = []
    checks: list[tuple[str, bool]] = []
    ratios: list[tuple[str, float]] = []
    tokshuf_runs = [("gpt2", str(GPT2)), ("r50k", "tiktoken:r50k_base"), ("cl100k", "tiktoken:cl100k_base")]
    zst = compressed(corpus)
    for threads in args.threads:
        rounds: dict[str, list[Result]] = {}
        for _ in range(args.rounds):
            for name, spec in tokshuf_runs:
                rounds.setdefault(name, []).append(
                    run_tokshuf(zst, args.out, name, spec, threads, text_bytes)
                )
        ours = {name: best_of(rs) for name, rs in rounds.items()}
        checks += [
            (f"{threads}t: {name} ids the same in every round", len({r.ids_sha256 for r in rs}) == 1)
            for name, rs in rounds.items()
        ]
        results += ours.values()
        checks.append(
            (f"{threads}t: tokshuf gpt2 == tokshuf r50k", ours["gpt2"].ids_sha256 == ours["r50k"].ids_sha256)
        )
        if args.megatron_lm:
            meg = run_megatron(
                corpus, args.out, args.megatron_lm, args.megatron_python, threads, text_bytes,
                ours["gpt2"].tokens,
            )  # fmt: skip
            results.append(meg)
            same = (meg.ids_sha256, meg.extra["idx_sha256"]) == (
                ours["gpt2"].ids_sha256,
                ours["gpt2"].extra["idx_sha256"],
            )
            checks.append((f"{threads}t: Megatron .bin/.idx == tokshuf gpt2", same))
            ratios.append(
                (
                    f"{threads}t tokshuf gpt2 / Megatron preprocess_data",
                    ours["gpt2"].text_mb_s / meg.text_mb_s,
                )
            )
    if not args.megatron_lm:
        print("Megatron-LM: not run (give --megatron-lm DIR, see the docstring)", file=sys.stderr)

    print(table(results))
    print()
    for name, ratio in ratios:
        print(f"{name}: {ratio:.2f}x (text MB/s)")
    for name, ok in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    (args.out / "results.json").write_text(
        json.dumps(
            {
                "corpus": {"path": str(corpus), "manifest": manifest, "text_bytes": text_bytes},
                "results": [asdict(r) | {"text_mb_s": r.text_mb_s, "mtok_s": r.mtok_s} for r in results],
                "ratios": dict(ratios),
                "checks": dict(checks),
            },
            indent=2,
        )
    )
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
