"""Benchmark: `tokshuf preprocess` against the tools people use today, side by side in one run.

    python benches/bench_preprocess.py                      # 200 MB corpus, 1 and 2 threads
    python benches/bench_preprocess.py --size 10MB --quick  # a smoke run
    python benches/bench_preprocess.py --megatron-lm ~/Megatron-LM --megatron-python ~/mvenv/bin/python

Corpus: ``tests/fixtures/make_corpus.py OUT --size 200MB --seed 0`` (offline, deterministic).
For each thread count:

* tokshuf, ``.jsonl.zst`` → ``.bin/.idx`` end to end (read, decompress, parse, tokenize, write,
  sync), ``--append-eod``: GPT-2 (``tokenizer.json``), ``tiktoken:r50k_base`` (same ids),
  ``tiktoken:cl100k_base``; "threads" are tokenizing workers, and the reader and writer threads
  run beside them (at one thread, on the second core: CPU% above 100), so at one thread cl100k
  also runs with the whole process pinned to one core;
* HF ``tokenizers`` ``encode_batch`` (GPT-2 ``tokenizer.json``) and ``tiktoken``
  ``encode_ordinary_batch`` (r50k_base, cl100k_base): tokenization only, texts preloaded;
* ``fastokens`` ``encode_batch_flat`` (GPT-2 ``tokenizer.json``, cl100k_base), tokenization only,
  when it is installed (``pip install fastokens``): the fastest exact library on PyPI;
* Megatron-LM ``tools/preprocess_data.py`` (HuggingFaceTokenizer, GPT-2), when a checkout is given:
  ``git archive core_v0.16.1 tools megatron/training megatron/legacy`` of NVIDIA/Megatron-LM into
  DIR, ``megatron/training/__init__.py`` replaced by a stub (``def __getattr__(name): return lambda
  *a, **k: None``), and a Python with ``megatron-core==0.16.1 transformers`` installed.

Each run is its own process: peak RSS is that process's (``wait4``), CPU% = (user + sys) / wall.
A shared 2-core VM runs the same job 20-40% slower or faster from one minute to the next, so the
tokshuf and fastokens runs (the target's two sides) are repeated ``--rounds`` times, interleaved,
and the fastest of each is reported (the spread is printed too), with the median of the rounds'
ratios (each round's two sides run seconds apart); the far slower peers run once.
The ids of every peer are checked equal to tokshuf's ``.bin`` (hashed the same way), and
Megatron's ``.bin/.idx`` byte-equal to tokshuf's. Ratios compare runs with the same thread count.
Results: a table on stdout and ``--out/results.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MAKE_CORPUS = REPO / "tests" / "fixtures" / "make_corpus.py"
GPT2 = REPO / "tests" / "fixtures" / "gpt2"
PEER = Path(__file__).resolve().parent / "peer_tokenize.py"


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


def measured(
    cmd: list[str], env: dict[str, str] | None = None, cpus: set[int] | None = None
) -> tuple[float, int, float, str]:
    """(wall seconds, peak RSS bytes, CPU seconds, stdout) of one child process, on ``cpus`` if
    given (all its threads)."""
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-{os.getpid()}.out"
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    with open(out, "w+") as f:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=f, env={**os.environ, **(env or {})}, preexec_fn=pin)
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


def run_tokshuf(
    corpus: Path, out: Path, name: str, spec: str, threads: int, text_bytes: int, one_core: bool = False
) -> Result:
    """``threads`` tokenizing workers; the reader and writer threads run beside them, on the
    other cores unless ``one_core`` pins the whole process to one."""
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
    cpus = set(sorted(os.sched_getaffinity(0))[:1]) if one_core else None
    wall, rss, cpu, _ = measured(cmd, {"TOKSHUF_NUM_THREADS": str(threads)}, cpus)
    s = json.loads(summary.read_text())
    bin_path = Path(f"{prefix}_text_document.bin")
    tokens = s["tokens"] - _non_empty_documents(Path(f"{prefix}_text_document.idx"))  # without eods
    result = Result(
        f"tokshuf {name}" + (", whole process on one core" if one_core else ""),
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


def run_peer(
    corpus: Path, lib: str, tokenizer: str, threads: int, dtype: str, eod: int | None = None
) -> Result:
    cmd = [sys.executable, str(PEER), str(corpus), "--lib", lib, "--tokenizer", tokenizer]
    cmd += ["--threads", str(threads), "--dtype", dtype]
    if eod is not None:
        cmd += ["--eod-id", str(eod)]
    wall, rss, cpu, stdout = measured(cmd)
    r = json.loads(stdout)
    label = {
        "hf": "HF tokenizers encode_batch",
        "tiktoken": "tiktoken encode_ordinary_batch",
        "sentencepiece": "sentencepiece encode",
        "fastokens": "fastokens encode_batch_flat",
    }[lib]
    short = Path(tokenizer).parent.name if tokenizer.endswith(".json") else tokenizer
    return Result(
        f"{label} {short}", threads, r["seconds"], wall, rss, cpu / wall, r["tokens"], r["text_bytes"],
        ids_sha256=r["ids_sha256"],
    )  # fmt: skip


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


def fastokens_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("fastokens") is not None


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
    ap.add_argument(
        "--rounds", type=int, default=3, help="interleaved repeats of tokshuf and fastokens (best of)"
    )
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
    tokshuf_runs = [("gpt2", str(GPT2), "uint16"), ("r50k", "tiktoken:r50k_base", "uint16")]
    tokshuf_runs.append(("cl100k", "tiktoken:cl100k_base", "int32"))
    zst = compressed(corpus)
    for threads in args.threads:
        rounds: dict[str, list[Result]] = {}
        for _ in range(args.rounds):
            for name, spec, _dtype in tokshuf_runs:
                rounds.setdefault(name, []).append(
                    run_tokshuf(zst, args.out, name, spec, threads, text_bytes)
                )
            if fastokens_installed():
                for name, tok, dtype in [("fk-gpt2", str(GPT2 / "tokenizer.json"), "uint16"),
                                         ("fk-cl100k", "cl100k_base", "int32")]:  # fmt: skip
                    rounds.setdefault(name, []).append(run_peer(corpus, "fastokens", tok, threads, dtype))
        best = {name: best_of(rs) for name, rs in rounds.items()}
        checks += [
            (f"{threads}t: {name} ids the same in every round", len({r.ids_sha256 for r in rs}) == 1)
            for name, rs in rounds.items()
        ]
        ours = {name: best[name] for name, _, _ in tokshuf_runs}
        hf = run_peer(corpus, "hf", str(GPT2 / "tokenizer.json"), threads, "uint16")
        r50k = run_peer(corpus, "tiktoken", "r50k_base", threads, "uint16")
        cl100k = run_peer(corpus, "tiktoken", "cl100k_base", threads, "int32")
        results += [*ours.values(), hf, r50k, cl100k]
        checks += [
            (f"{threads}t: tokshuf gpt2 ids == HF tokenizers", ours["gpt2"].ids_sha256 == hf.ids_sha256),
            (f"{threads}t: tokshuf r50k ids == tiktoken r50k", ours["r50k"].ids_sha256 == r50k.ids_sha256),
            (
                f"{threads}t: tokshuf cl100k ids == tiktoken cl100k",
                ours["cl100k"].ids_sha256 == cl100k.ids_sha256,
            ),
            (f"{threads}t: tokshuf gpt2 == tokshuf r50k", ours["gpt2"].ids_sha256 == ours["r50k"].ids_sha256),
        ]
        ratios += [
            (f"{threads}t tokshuf gpt2 (HF json) / HF encode_batch", ours["gpt2"].text_mb_s / hf.text_mb_s),
            (f"{threads}t tokshuf r50k / tiktoken r50k", ours["r50k"].text_mb_s / r50k.text_mb_s),
            (f"{threads}t tokshuf cl100k / tiktoken cl100k", ours["cl100k"].text_mb_s / cl100k.text_mb_s),
        ]
        if fastokens_installed():
            fk_gpt2, fk_cl100k = best["fk-gpt2"], best["fk-cl100k"]
            results += [fk_gpt2, fk_cl100k]
            checks += [
                (
                    f"{threads}t: fastokens gpt2 ids == tokshuf gpt2",
                    fk_gpt2.ids_sha256 == ours["gpt2"].ids_sha256,
                ),
                (
                    f"{threads}t: fastokens cl100k ids == tokshuf cl100k",
                    fk_cl100k.ids_sha256 == ours["cl100k"].ids_sha256,
                ),
            ]
            ratios += [
                (
                    f"{threads}t tokshuf gpt2 end to end / fastokens gpt2 tokenization only",
                    ours["gpt2"].text_mb_s / fk_gpt2.text_mb_s,
                ),
                (
                    f"{threads}t tokshuf cl100k end to end / fastokens cl100k tokenization only",
                    ours["cl100k"].text_mb_s / fk_cl100k.text_mb_s,
                ),
            ]
            # The two sides of a round run a few seconds apart, so their ratio is the least
            # touched by the VM's slow and fast minutes.
            for name in ("gpt2", "cl100k"):
                pairs = zip(rounds[name], rounds[f"fk-{name}"], strict=True)
                per_round = [fk.seconds / us.seconds for us, fk in pairs]
                label = f"{threads}t tokshuf {name} / fastokens {name}, median of {len(per_round)} rounds"
                spread = f"range {min(per_round):.2f}-{max(per_round):.2f}"
                ratios.append((f"{label} ({spread})", statistics.median(per_round)))
            if threads == 1:
                # At one thread the reader (decompression, JSON) and the writer run on the second
                # core, beside the one tokenizing worker (CPU% > 100): this row pins all of
                # tokshuf to the core fastokens' one thread has.
                pinned = run_tokshuf(zst, args.out, "cl100k", "tiktoken:cl100k_base", 1, text_bytes, True)
                results.append(pinned)
                checks.append(
                    (
                        "1t: tokshuf cl100k on one core ids == on two",
                        pinned.ids_sha256 == ours["cl100k"].ids_sha256,
                    )
                )
                ratios.append(
                    (
                        "1t tokshuf cl100k end to end on one core / fastokens cl100k tokenization only",
                        pinned.text_mb_s / fk_cl100k.text_mb_s,
                    )
                )
        if args.megatron_lm:
            meg = run_megatron(
                corpus, args.out, args.megatron_lm, args.megatron_python, threads, text_bytes, hf.tokens
            )
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
    if not fastokens_installed():
        print("fastokens: not installed (pip install fastokens to compare)", file=sys.stderr)
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
