"""benches/bench_peers.py, run as `make bench` runs it (on a tiny corpus, with the peers of the test
extra): its tables, plot and ids check, and that a document whose ids differ is counted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benches" / "bench_peers.py"


def corpus(path: Path) -> list[str]:
    pieces = [
        "The quick brown fox can't jump over the lazy dog's 12345 kennels.",
        "\tdef f(x):\n\t\treturn 'magic'  # it'll do\n",
        "Ünïcödé — “curly quotes”, naïve café, 東京タワー, Ελληνικά, emoji 🙂🙂.",
        "    indented\n\n\n   whitespace runs     and  tabs\t\t\tend",
        "<|endoftext|> is plain text here",
    ]
    texts = ["", " \n"] + [
        " ".join(pieces[(i + j) % len(pieces)] for j in range(i % 7 + 1)) for i in range(60)
    ]
    path.write_text(
        "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8"
    )
    return texts


def run(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(BENCH), "--quick", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)


def test_tables_plot_and_ids(tmp_path: Path) -> None:
    texts = corpus(tmp_path / "tiny.jsonl")
    out, docs = tmp_path / "out", tmp_path / "docs"
    common = [
        "--corpus",
        str(tmp_path / "tiny.jsonl"),
        "--threads",
        "1",
        "--out",
        str(out),
        "--docs",
        str(docs),
    ]
    proc = run(*common, "--families", "gpt2,cl100k", "--libs", "tokshuf,tiktoken,tokenizers")
    assert proc.returncode == 0, proc.stderr[-3000:]

    results = json.loads((out / "results-quick.json").read_text())["results"]
    by = {(r["family"], r["lib"], r["mode"]): r for r in results}
    for family in ("gpt2", "cl100k"):
        tokenize, e2e = by[(family, "tokshuf", "tokenize")], by[(family, "tokshuf", "e2e")]
        assert tokenize["status"] == e2e["status"] == "ok"
        assert (tokenize["mismatching_docs"], tokenize["compared_docs"]) == (0, len(texts))
        # `preprocess` writes no sequence for a document without tokens (the empty text)
        assert (e2e["mismatching_docs"], e2e["compared_docs"]) == (0, sum(1 for t in texts if t))
        assert tokenize["text_bytes"] == sum(len(t.encode()) for t in texts)
    assert by[("gpt2", "tokenizers", "tokenize")]["reference"] == "tokenizers"
    assert by[("cl100k", "tiktoken", "tokenize")]["reference"] == "tiktoken"
    # tiktoken runs GPT-2 from the r50k rank file: the ids of the tokenizer.json but on the
    # documents holding its added token <|endoftext|>, which tokenizers (and tokshuf) recognise
    # and `encode_ordinary` leaves as text
    tiktoken_gpt2 = by[("gpt2", "tiktoken", "tokenize")]
    assert tiktoken_gpt2["form"] == "ranks"
    assert tiktoken_gpt2["mismatching_docs"] == sum(1 for t in texts if "<|endoftext|>" in t) > 0
    assert by[("cl100k", "tiktoken", "tokenize")]["mismatching_docs"] == 0
    # cl100k's tokenizer.json is not among the fixtures: n/a, saying which file is missing
    missing = by[("cl100k", "tokenizers", "tokenize")]
    assert missing["status"] == "n/a"
    assert "cl100k_base-hf/tokenizer.json" in missing["reason"]

    page = (docs / "benchmarks.md").read_text()
    assert "| GPT-2 | 1 |" in page
    assert "| cl100k | 1 |" in page
    assert "python benches/bench_peers.py --quick" in page
    assert "tiktoken 0." in page  # the versions
    assert (docs / "benchmarks-tiny.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the page is a function of results.json: --report rewrites it without measuring
    again = tmp_path / "again"
    cmd = [sys.executable, str(BENCH), "--report", str(out / "results-quick.json"), "--docs", str(again)]
    subprocess.run(cmd, capture_output=True, check=True, timeout=120)
    assert (again / "benchmarks.md").read_text() == page
    assert (again / "benchmarks-tiny.png").exists()

    # A reference that differs on one document: tokshuf's row is flagged and the run fails. In two
    # rounds, one result holds the passes of both.
    (cache,) = (out / "references").glob("*-cl100k-tiktoken-*.json")
    digests = json.loads(cache.read_text())
    digests[3] = "0" * 16
    cache.write_text(json.dumps(digests))
    proc = run(*common, "--families", "cl100k", "--libs", "tokshuf", "--no-end-to-end", "--rounds", "2")
    assert proc.returncode == 1
    (result,) = json.loads((out / "results-quick.json").read_text())["results"]
    assert (result["mismatching_docs"], result["compared_docs"]) == (1, len(texts))
    assert len(result["seconds"]) == len(result["cpu_seconds"]) == 2  # one pass a round (--quick)
    page = (docs / "benchmarks.md").read_text()
    assert f"**1** of {len(texts)}" in page
    assert "the median of 1 pass in each of 2 rounds" in page
