"""The boundary of `preprocess`: GIL released, Ctrl-C, determinism across worker counts, bounded
memory, progress output and the summary file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import tokenizers
from corpus import GPT2

import tokshuf


def synthetic_corpus(path: Path, mb: float) -> Path:
    """Varied text of about ``mb`` MB (fast to write; tokenizes like prose): 1 MB of lines, repeated."""
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
    words += ["lambda", "mu", "naïve", "café", "日本", "42"]
    lines, written, i = [], 0, 0
    while written < min(mb, 1) * 1e6:
        n = 50 + (i * 7919) % 900
        text = " ".join(words[(i + j * j) % len(words)] for j in range(n))
        lines.append(json.dumps({"id": i, "text": text}, ensure_ascii=False) + "\n")
        written += len(lines[-1].encode())
        i += 1
    block = "".join(lines)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(max(1, round(mb))):
            f.write(block)
    return path


def run_in_thread_and_tick(corpus: Path, out: Path) -> tuple[float, list[float], float]:
    """Preprocess in a thread while this one ticks every millisecond: (start, ticks, duration)."""
    done = threading.Event()

    def work() -> None:
        try:
            tokshuf.preprocess(corpus, out, GPT2, num_threads=1)
        finally:
            done.set()

    thread = threading.Thread(target=work)
    ticks: list[float] = []
    start = time.perf_counter()
    thread.start()
    while not done.is_set():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    thread.join()
    return start, ticks, time.perf_counter() - start


def test_gil_is_released(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The reference encoder, and a corpus that grows until the call lasts long enough to tell.
    monkeypatch.setenv("TOKSHUF_FAST_BPE", "0")
    for mb in (4, 16, 64):
        corpus = synthetic_corpus(tmp_path / f"c{mb}.jsonl", mb)
        start, ticks, duration = run_in_thread_and_tick(corpus, tmp_path / f"o{mb}")
        if duration > 0.3:
            break
    assert duration > 0.3, "the run is too short to tell"
    gaps = [b - a for a, b in zip([start, *ticks], ticks, strict=False)]
    # With the GIL held for the whole call, this thread would stall for all of it.
    assert max(gaps) < 0.5 * duration, (max(gaps), duration)
    assert len(ticks) > 50


def test_ctrl_c_stops_and_leaves_nothing(tmp_path: Path) -> None:
    # Several seconds of work after the first progress line (about 1 s in), however fast the
    # machine; the signal stops it early, so the size costs only the writing of the corpus.
    corpus = synthetic_corpus(tmp_path / "c.jsonl", 48)
    out = tmp_path / "out"
    out.mkdir()
    cmd = [sys.executable, "-m", "tokshuf", "preprocess", "--input", str(corpus)]
    cmd += [
        "--output-prefix",
        str(out / "x"),
        "--tokenizer",
        str(GPT2),
        "--workers",
        "1",
        "--progress",
        "json",
    ]
    # The reference encoder: seconds of work, so that the signal lands mid-run.
    env = {**os.environ, "TOKSHUF_FAST_BPE": "0"}
    with subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env) as proc:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # the first progress line: the run is under way
        assert json.loads(first)["progress"] == "preprocess", first
        assert not json.loads(first)["done"]
        assert any(p.name.startswith("x_text_document") for p in out.iterdir()), "temporary outputs exist"
        proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        stderr = first + proc.stderr.read()
    assert rc == 130, stderr
    assert "interrupted" in stderr
    assert list(out.iterdir()) == [], "temporary outputs are removed"


def test_byte_identical_for_every_worker_count(tmp_path: Path, make_corpus: Any) -> None:
    corpus, _ = make_corpus("c1.jsonl", "--size", "1MB", "--seed", "1")
    outputs = []
    for workers in range(1, 9):
        prefix = tmp_path / f"w{workers}"
        tokshuf.preprocess(
            corpus, prefix, "tiktoken:r50k_base", append_eod=True, num_threads=workers, batch_bytes=32 << 10
        )
        outputs.append(
            (
                Path(f"{prefix}_text_document.bin").read_bytes(),
                Path(f"{prefix}_text_document.idx").read_bytes(),
            )
        )
    assert all(o == outputs[0] for o in outputs[1:])


def test_the_bin_is_the_same_written_direct_or_through_the_page_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 10 MB of uint16 tokens: whole direct-write buffers (8 MiB) and a tail shorter than a block.
    corpus = synthetic_corpus(tmp_path / "c.jsonl", 5)
    # The test's disk takes O_DIRECT where it can; tmpfs (when there is one) refuses it and
    # exercises the fallback.
    dirs = [tmp_path] + [Path(d) for d in ["/dev/shm"] if os.access(d, os.W_OK)]
    outputs = []
    for base in dirs:
        for direct in ["1", "0"]:
            monkeypatch.setenv("TOKSHUF_DIRECT_IO", direct)
            prefix = base / f"tokshuf-test-{os.getpid()}-{direct}"
            tokshuf.preprocess(corpus, prefix, "byte", append_eod=True, num_threads=2)
            for suffix in ["_text_document.bin", "_text_document.idx"]:
                path = Path(f"{prefix}{suffix}")
                outputs.append((suffix, path.read_bytes()))
                path.unlink()
            Path(f"{prefix}_summary.json").unlink(missing_ok=True)
    bins = [b for suffix, b in outputs if suffix.endswith(".bin")]
    assert len(bins[0]) > 9 << 20
    assert len(bins[0]) % 4096 != 0
    assert all(b == bins[0] for b in bins[1:])
    assert len({b for suffix, b in outputs if suffix.endswith(".idx")}) == 1


PEAK_RSS = """
import resource, sys, tokshuf
tokshuf.preprocess(sys.argv[1], sys.argv[2], "byte", append_eod=True, num_threads=2, batch_bytes=256 << 10)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def peak_rss(corpus: Path, prefix: Path) -> int:
    out = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, str(corpus), str(prefix)], capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip())


def test_peak_memory_does_not_grow_with_the_input(tmp_path: Path) -> None:
    small = synthetic_corpus(tmp_path / "small.jsonl", 6)
    big = synthetic_corpus(tmp_path / "big.jsonl", 48)
    rss_small = peak_rss(small, tmp_path / "s")
    rss_big = peak_rss(big, tmp_path / "b")
    # Holding the extra input (42 MB) or its tokens (4 bytes per byte in memory) would add
    # 40-170 MB; a bounded pipeline adds nothing but allocator noise.
    assert rss_big < rss_small + 12e6, (rss_small, rss_big)


def test_progress_json_lines_and_summary_file(tmp_path: Path, make_corpus: Any) -> None:
    corpus, manifest = make_corpus("c1.jsonl", "--size", "1MB", "--seed", "1")
    cmd = [sys.executable, "-m", "tokshuf", "preprocess", "--input", str(corpus)]
    cmd += ["--output-prefix", str(tmp_path / "p"), "--tokenizer", "tiktoken:cl100k_base", "--append-eod"]
    run = subprocess.run([*cmd, "--progress", "json"], capture_output=True, text=True, check=True)
    events = [json.loads(line) for line in run.stderr.splitlines() if line.startswith("{")]
    assert events, run.stderr
    last = events[-1]
    size = corpus.stat().st_size
    assert last["done"] is True
    assert (last["bytes"], last["total_bytes"], last["documents"]) == (size, size, manifest["documents"])
    assert "M tokens/s" in run.stdout

    summary = json.loads((tmp_path / "p_summary.json").read_text())
    assert summary["documents"] == manifest["documents"]
    assert summary["input_bytes"] == summary["decompressed_bytes"] == size
    assert summary["tokens"] == last["tokens"] > summary["documents"]
    assert summary["tokenizer"]["name"] == "cl100k_base"
    assert summary["tokenizer"]["ranks_sha256"] == (
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
    )
    assert summary["config"]["append_eod"] is True
    assert summary["skipped"] == {}
    assert summary["seconds"] > 0

    quiet = subprocess.run([*cmd, "--quiet", "--summary", "none"], capture_output=True, text=True, check=True)
    assert (quiet.stdout, quiet.stderr) == ("", "")


def test_summary_path_options(tmp_path: Path, make_corpus: Any) -> None:
    corpus, _ = make_corpus("c1.jsonl", "--size", "1MB", "--seed", "1")
    tokshuf.preprocess(corpus, tmp_path / "a", "byte", summary=False)
    # No summary; the commit record that publishes the pair is always written.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "a.commit.json",
        "a_text_document.bin",
        "a_text_document.idx",
    ]
    tokshuf.preprocess(corpus, tmp_path / "b", "byte", summary=tmp_path / "elsewhere.json")
    assert json.loads((tmp_path / "elsewhere.json").read_text())["outputs"][0]["key"] == "text"


def test_tokenizers_object_gives_the_same_output(tmp_path: Path) -> None:
    corpus = synthetic_corpus(tmp_path / "c.jsonl", 0.2)
    hf = tokenizers.Tokenizer.from_file(str(GPT2 / "tokenizer.json"))
    tokshuf.preprocess(corpus, tmp_path / "obj", hf, append_eod=True)
    tokshuf.preprocess(corpus, tmp_path / "file", GPT2, append_eod=True)
    for ext in (".bin", ".idx"):
        obj = (tmp_path / f"obj_text_document{ext}").read_bytes()
        assert obj == (tmp_path / f"file_text_document{ext}").read_bytes()


def test_cli_reports_unknown_tokenizer(tmp_path: Path) -> None:
    corpus = synthetic_corpus(tmp_path / "c.jsonl", 0.01)
    cmd = [sys.executable, "-m", "tokshuf", "preprocess", "--input", str(corpus), "--output-prefix", "x"]
    run = subprocess.run(
        [*cmd, "--tokenizer", "cl100k_base"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "TOKSHUF_NUM_THREADS": "1"},
    )
    assert run.returncode == 1
    assert 'did you mean "tiktoken:cl100k_base"' in run.stderr


@pytest.mark.parametrize("dtype", ["auto", "int32"])
def test_dtype_choice(tmp_path: Path, dtype: str) -> None:
    corpus = synthetic_corpus(tmp_path / "c.jsonl", 0.01)
    s = tokshuf.preprocess(corpus, tmp_path / "o", "tiktoken:o200k_base", dtype=dtype)
    assert s["dtype"] == "int32"  # 200019 ids do not fit uint16
