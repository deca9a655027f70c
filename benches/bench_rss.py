"""Benchmark: is the peak RSS of `tokshuf preprocess` flat in the size of its input?

    python benches/bench_rss.py            # 200 MB, the same 200 MB ten times over, 2 GB
    python benches/bench_rss.py --quick    # 20 MB, 200 MB

Three corpora from ``tests/fixtures/make_corpus.py`` (offline, deterministic), ``.jsonl.zst``:

* the base corpus (``--size 200MB --seed 0``);
* the base corpus ten times over (its zstd frames concatenated): the same documents, a run ten
  times as long. Any growth here is memory that a run accumulates;
* a corpus ten times the size (``--size 2GB --seed 1``): different documents, with a longer tail
  of document lengths. Buffers must hold a whole document (its line, its decoded text, its
  tokens), so the peak also follows the longest line, which is printed beside it.

Each is tokenized with cl100k_base by 2 workers (``--append-eod``), ``--rounds`` times; the table
gives the highest peak RSS of the rounds (``wait4``) and its ratio to the base corpus's.
Results: a table on stdout and ``--out/results.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_preprocess import REPO, compressed, make_corpus, measured


def longest_line(path: Path) -> int:
    with open(path, "rb") as f:
        return max((len(line) for line in f), default=0)


def repeated(zst: Path, times: int) -> Path:
    """``zst``'s frames ``times`` over: a valid ``.zst`` of the corpus repeated."""
    out = zst.with_name(f"{zst.name.removesuffix('.jsonl.zst')}-x{times}.jsonl.zst")
    if not out.exists():
        data = zst.read_bytes()
        tmp = Path(f"{out}.tmp")
        with open(tmp, "wb") as f:
            for _ in range(times):
                f.write(data)
        tmp.rename(out)
    return out


def peak_rss(corpus: Path, out: Path, rounds: int) -> tuple[int, float]:
    """The highest peak RSS of ``rounds`` runs, and the fastest run's wall seconds."""
    prefix = out / "tokshuf-rss"
    cmd = [sys.executable, "-m", "tokshuf", "preprocess", "--input", str(corpus)]
    cmd += ["--output-prefix", str(prefix), "--tokenizer", "tiktoken:cl100k_base"]
    cmd += ["--append-eod", "--workers", "2", "--quiet"]
    peaks, walls = [], []
    for _ in range(rounds):
        wall, rss, _, _ = measured(cmd)
        peaks.append(rss)
        walls.append(wall)
        for ext in ("bin", "idx"):
            Path(f"{prefix}_text_document.{ext}").unlink()
    return max(peaks), min(walls)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default=None, help="base corpus size (default 200MB; 20MB with --quick)")
    ap.add_argument("--times", type=int, default=10, help="how many times larger the other two corpora are")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=REPO / "bench-out" / "rss")
    ap.add_argument("--quick", action="store_true")
    args, _ = ap.parse_known_args()  # `make bench` passes every benchmark the same arguments
    size = args.size or ("20MB" if args.quick else "200MB")
    units = {"MB": 10**6, "GB": 10**9}
    n, unit = float(size[:-2]), size[-2:].upper()
    big = f"{n * args.times * units[unit] / 1e6:g}MB"
    args.out.mkdir(parents=True, exist_ok=True)

    base, _ = make_corpus(args.out, size, 0)
    larger, _ = make_corpus(args.out, big, 1)
    corpora = [
        (f"{size} (seed 0)", compressed(base), base),
        (f"the same {size} x{args.times}", repeated(compressed(base), args.times), base),
        (f"{big} (seed 1)", compressed(larger), larger),
    ]
    rows = []
    for label, zst, jsonl in corpora:
        print(f"measuring {label} ...", file=sys.stderr)
        rss, wall = peak_rss(zst, args.out, args.rounds)
        rows.append({"corpus": label, "peak_rss": rss, "wall": wall, "longest_line": longest_line(jsonl)})
    first = rows[0]["peak_rss"]
    print("| corpus | longest line (MB) | peak RSS (MB) | vs base | wall (s) |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['corpus']} | {r['longest_line'] / 1e6:.1f} | {r['peak_rss'] / 1e6:.0f} "
            f"| {r['peak_rss'] / first:.3f}x | {r['wall']:.1f} |"
        )
    (args.out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
