"""Tokenizers side by side: tokshuf against the fast and the defining tokenizers on PyPI, in one run.

    python benches/bench_peers.py                          # everything; writes docs/benchmarks.md
    python benches/bench_peers.py --families gpt2,cl100k --threads 1,2
    python benches/bench_peers.py --quick                  # a smoke run (3 MB + 2 MB, one pass)
    python benches/bench_peers.py --tokenizers ../shared/tokenizers   # adds cl100k/o200k tokenizer.json
    python benches/bench_peers.py --families gpt2,cl100k,neox,dolma2,tekken,mistral-v1,mistral-v1-model

Peers (``pip install -e ".[bench]"``; a missing one is reported, not fatal): fastokens, tokie,
riptoken, bpe-openai, kitoken, tiktoken, tokenizers (and sentencepiece for a ``.model``). Each is
called through its fastest bulk API (``API`` below). Two measurements:

* **tokenize only**: the texts preloaded in Python, in batches of 1,000 documents; only the
  library's call is timed (work it defers from loading to its first call included), its output
  is read afterwards;
* **end to end**: ``tokshuf.preprocess`` from the JSON-lines file to ``.bin/.idx``, start-up
  (loading the tokenizer) included. No peer reads JSON lines into ids itself, so theirs is n/a.

Each (library, tokenizer, threads, corpus) runs in its own process, pinned to as many cores as it
has threads (``taskset -c 0`` at one thread: fastokens and tokie size their pools themselves).
Each pass builds a fresh tokenizer outside the timed part (cold caches); the median of
``--passes`` is reported (of every pass of ``--rounds`` runs, which take the libraries in turn so
that a change in the machine's load weighs on all alike); MB = 10^6 bytes of UTF-8 text. A
library whose bulk API is sequential or holds the GIL (bpe-openai, kitoken) runs N forked
processes at N threads, each on every N-th batch.

Ids: every document's ids are hashed (outside the timed part) and compared with those of the
defining library: tiktoken for rank files, ``tokenizers`` for ``tokenizer.json``, sentencepiece
for ``.model`` (computed once per corpus and tokenizer, cached in ``--out``). A peer whose ids
differ is still shown, flagged, with its count of mismatching documents.

Corpora: ``tests/fixtures/make_corpus.py`` (``--size 100MB --seed 0``, and ``--size 20MB --seed 7
--mix prose=0.2,code=0.2,i18n=0.6``), or ``--corpus FILE.jsonl``. Tokenizer files: ``--tokenizers
DIR`` (or ``$TOKSHUF_BENCH_TOKENIZERS``) laid out as ``../shared/tokenizers``; by default they
are unpacked from ``tests/fixtures`` and OpenAI's rank files rebuilt from the ones tokshuf embeds
(checked against the SHA-256 that tiktoken pins).

Output: ``docs/benchmarks.md`` and ``docs/benchmarks-<corpus>.png`` (``--docs``; a ``--quick`` run
writes them to ``--out/quick``), with the machine, the command, the date and the versions; every
run's figures in ``--out/results.json`` (``results-quick.json``), from which ``--report`` rewrites
the page. Targets (issue 42): tokenize only >= 1.3x fastokens on GPT-2, cl100k, o200k and Qwen2 at
1 and 2 threads on both corpora; ``preprocess`` end to end >= 1.2x fastokens' tokenize-only rate.
Exits non-zero if tokshuf's ids differ anywhere.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import hashlib
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
MAKE_CORPUS = FIXTURES / "make_corpus.py"
BATCH = 1000

# --- what is measured --------------------------------------------------------------------------

LIBS = ("tokshuf", "fastokens", "tokie", "riptoken", "bpe-openai", "kitoken", "tiktoken", "tokenizers")
OPTIONAL_LIBS = ("sentencepiece",)  # the defining library of a `.model`; a column only if it ran
MODULES = {"bpe-openai": "bpe_openai"}
# How each library is called, and what "N threads" means for it.
API = {
    "tokshuf": "`Tokenizer(spec).encode_batch_numpy(batch, num_threads=N)`",
    "fastokens": "`encode_batch_flat(batch, split_special_tokens=True)`, `FASTOKENS_BPE_THREADS=N`",
    "tokie": "`encode_batch_flat(batch, add_special_tokens=False)`; one thread per core it may use",
    "riptoken": "`CoreBPE(ranks, {}, pattern).encode_ordinary_batch(batch)`, `RAYON_NUM_THREADS=N`",
    "bpe-openai": "`_bindings.tokenizer_for_encoding(name).encode(text)` per text (holds the GIL): "
    "N forked processes",
    "kitoken": "`encode_all(batch, encode_specials=False)` (sequential): N forked processes",
    "tiktoken": "`encode_ordinary_batch(batch, num_threads=N)`",
    "tokenizers": "`encode_batch_fast(batch, add_special_tokens=False)`, `RAYON_NUM_THREADS=N`",
    "sentencepiece": "`encode(batch, num_threads=N)`",
}
FORKED = {"bpe-openai", "kitoken"}
# The forms of a tokenizer each library loads, in its order of preference after the family's own.
LOADS = {
    "tokshuf": ("json", "ranks", "model"),
    "fastokens": ("json", "ranks"),
    "tokie": ("json",),
    "riptoken": ("ranks",),
    "bpe-openai": ("embedded",),
    "kitoken": ("json", "ranks", "model"),
    "tiktoken": ("ranks",),
    "tokenizers": ("json",),
    "sentencepiece": ("model",),
}
REFERENCE = {"json": "tokenizers", "ranks": "tiktoken", "model": "sentencepiece"}

# Meta's split pattern for the Llama 3 rank file (the file has none).
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


@dataclass(frozen=True)
class Family:
    """A tokenizer, by the files that hold it (relative to the tokenizers directory)."""

    label: str
    form: str  # the defining form: "json", "ranks" or "model"
    json: str | None = None
    ranks: str | None = None
    model: str | None = None
    encoding: str | None = None  # tiktoken's name for the rank file (its pattern and pinned SHA-256)
    pattern: str | None = None  # the split pattern of a rank file tiktoken does not name
    tokshuf: str | None = None  # tokshuf's spec, when it names the tokenizer rather than loads the file

    def path(self, form: str) -> str | None:
        return {"json": self.json, "ranks": self.ranks, "model": self.model}.get(form)


FAMILIES = {
    "gpt2": Family(
        "GPT-2", "json", json="gpt2/tokenizer.json", ranks="r50k_base.tiktoken", encoding="r50k_base"
    ),
    "cl100k": Family(
        "cl100k",
        "ranks",
        json="cl100k_base-hf/tokenizer.json",
        ranks="cl100k_base.tiktoken",
        encoding="cl100k_base",
        tokshuf="tiktoken:cl100k_base",
    ),
    "o200k": Family(
        "o200k",
        "ranks",
        json="o200k_base-hf/tokenizer.json",
        ranks="o200k_base.tiktoken",
        encoding="o200k_base",
        tokshuf="tiktoken:o200k_base",
    ),
    "qwen2": Family("Qwen2", "json", json="qwen2/tokenizer.json"),
    "llama3": Family("Llama-3", "ranks", ranks="llama3/tokenizer.model", pattern=LLAMA3_PATTERN),
    "neox": Family("GPT-NeoX-20B", "json", json="gpt-neox-20b/tokenizer.json"),
    "dolma2": Family("OLMo-2 dolma2", "json", json="olmo2-dolma2/tokenizer.json"),
    "tekken": Family("Mistral Tekken", "json", json="mistral-tekken/tokenizer.json"),
    "mistral-v1": Family("Mistral v1", "json", json="mistral-v1-sentencepiece/tokenizer.json"),
    "mistral-v1-model": Family(
        "Mistral v1 `.model`", "model", model="mistral-v1-sentencepiece/tokenizer.model"
    ),
}
DEFAULT_FAMILIES = ("gpt2", "cl100k", "o200k", "qwen2", "llama3")


@dataclass(frozen=True)
class Corpus:
    label: str
    title: str
    size: str
    seed: int
    mix: str | None


CORPORA = {
    "english": Corpus("english", "English-heavy", "100MB", 0, None),
    "multilingual": Corpus("multilingual", "multilingual", "20MB", 7, "prose=0.2,code=0.2,i18n=0.6"),
}
QUICK_SIZES = {"english": "3MB", "multilingual": "2MB"}


def form_of(lib: str, fam: Family, tokenizers: Path) -> tuple[str, str] | str:
    """``(form, path)`` of the file ``lib`` loads for ``fam`` (the family's own form first), or why
    it cannot run it."""
    if lib == "bpe-openai":
        if fam.encoding in ("cl100k_base", "o200k_base"):
            return "embedded", fam.encoding
        return "ships cl100k and o200k only"
    forms = [fam.form, *(f for f in LOADS[lib] if f != fam.form)]
    missing = []
    for form in forms:
        if form not in LOADS[lib] or fam.path(form) is None:
            continue
        path = tokenizers / str(fam.path(form))
        if path.exists():
            return form, str(path)
        missing.append(str(fam.path(form)))
    if missing:
        return f"no {' or '.join(missing)} in the tokenizers directory"
    return f"does not load {describe_form(fam.form)}"


def describe_form(form: str) -> str:
    return {"json": "tokenizer.json", "ranks": "rank files", "model": "SentencePiece .model"}[form]


# --- corpora and tokenizer files -----------------------------------------------------------------


def make_corpus(corpus: Corpus, size: str, out: Path) -> Path:
    name = f"corpus-{corpus.label}-{size}-s{corpus.seed}.jsonl"
    path = out / name
    if not Path(f"{path}.manifest.json").exists():
        print(f"generating {path} ...", file=sys.stderr, flush=True)
        cmd = [sys.executable, str(MAKE_CORPUS), str(path), "--size", size, "--seed", str(corpus.seed)]
        if corpus.mix:
            cmd += ["--mix", corpus.mix]
        subprocess.run(cmd, check=True)
    return path


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            h.update(chunk)
    return h.hexdigest()


def corpus_stats(path: Path) -> dict[str, Any]:
    """Documents, UTF-8 text bytes and SHA-256 of a JSON-lines file (cached beside it)."""
    st = path.stat()
    cache = Path(f"{path}.stats.json")
    key = [st.st_size, st.st_mtime_ns]
    if cache.exists():
        stats: dict[str, Any] = json.loads(cache.read_text())
        if stats.get("key") == key:
            return stats
    texts = load_texts(path)
    stats = {
        "key": key,
        "documents": len(texts),
        "text_bytes": sum(len(t.encode("utf-8", "surrogatepass")) for t in texts),
        "sha256": file_sha256(path),
    }
    cache.write_text(json.dumps(stats))
    return stats


def load_texts(path: Path) -> list[str]:
    texts = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                value = json.loads(line).get("text")
                if isinstance(value, str):
                    texts.append(value)
    return texts


def tiktoken_spec(name: str, data: bytes) -> dict[str, Any]:
    """tiktoken's own constructor arguments for OpenAI encoding ``name`` (pattern, special
    tokens), fed ``data`` as its rank file, which must have the SHA-256 tiktoken pins."""
    import tiktoken_ext.openai_public as openai_public

    def load_local(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        got = hashlib.sha256(data).hexdigest()
        if expected_hash is not None and got != expected_hash:
            raise SystemExit(f"{name}: the rank file's sha256 is {got}, tiktoken pins {expected_hash}")
        return read_ranks(data)

    saved = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = load_local
    try:
        spec: dict[str, Any] = openai_public.ENCODING_CONSTRUCTORS[name]()
    finally:
        openai_public.load_tiktoken_bpe = saved
    return spec


def read_ranks(data: bytes) -> dict[bytes, int]:
    """A tiktoken rank file's ``{token: rank}`` (lines of base64 token, space, rank)."""
    import base64

    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def default_tokenizers(out: Path, families: Sequence[str]) -> Path:
    """A tokenizers directory laid out as ``../shared/tokenizers``, made from ``tests/fixtures``
    (zstd-compressed copies) and the OpenAI rank files tokshuf embeds."""
    import base64

    import zstandard

    root = out / "tokenizers"
    for name in families:
        fam = FAMILIES[name]
        for rel in (fam.json, fam.model, fam.ranks):
            if rel is None or (root / rel).exists():
                continue
            dst = root / rel
            if rel == "gpt2/tokenizer.json":
                src = FIXTURES / "gpt2" / "tokenizer.json"
            elif rel.endswith(".tiktoken"):
                src = None
            else:
                src = FIXTURES / "tokenizers" / f"{rel.replace('/', '_')}.zst"
            if src is not None and not src.exists():
                continue  # e.g. cl100k's tokenizer.json: only in a --tokenizers directory
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src is None:
                from tokshuf.tokenizer import tiktoken_encoding

                ranks = sorted(
                    tiktoken_encoding(str(fam.encoding))._mergeable_ranks.items(), key=lambda kv: kv[1]
                )
                data = b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in ranks)
                tiktoken_spec(str(fam.encoding), data)  # checks the SHA-256 tiktoken pins
            elif src.suffix == ".zst":
                data = zstandard.ZstdDecompressor().decompress(src.read_bytes(), max_output_size=1 << 28)
            else:
                data = src.read_bytes()
            tmp = dst.with_name(dst.name + ".tmp")
            tmp.write_bytes(data)
            tmp.rename(dst)
    return root


# --- one measurement (a worker process) ---------------------------------------------------------

Call = Callable[[list[str]], Any]
Split = Callable[[Any], Sequence[Any]]  # a call's output -> each document's ids


def encoder(task: dict[str, Any]) -> tuple[Callable[[], Call], Split]:
    """``(make, split)``: ``make()`` builds a fresh tokenizer and returns its bulk call."""
    import numpy as np

    lib, threads, form, path = task["lib"], task["threads"], task["form"], task["path"]
    fam = FAMILIES[task["family"]]

    def offsets_split(out: Any) -> Sequence[Any]:
        ids, off = np.asarray(out[0]), np.asarray(out[1])
        return [ids[off[i] : off[i + 1]] for i in range(len(off) - 1)]

    def lists(out: Any) -> Sequence[Any]:
        return out  # type: ignore[no-any-return]

    if lib == "tokshuf":
        import tokshuf

        spec = fam.tokshuf or path

        def make_tokshuf() -> Call:
            tok = tokshuf.Tokenizer(spec)
            return lambda batch: tok.encode_batch_numpy(batch, num_threads=threads)

        return make_tokshuf, offsets_split
    if lib == "fastokens":
        import fastokens

        def make_fastokens() -> Call:
            if form == "json":
                tok = fastokens.Tokenizer.from_file(path)
            elif fam.encoding in ("cl100k_base", "o200k_base"):
                tok = fastokens.Tokenizer.from_tiktoken(path, encoding=fam.encoding)
            else:
                tok = fastokens.Tokenizer.from_tiktoken(path, pattern=rank_pattern(fam, path))
            return lambda batch: tok.encode_batch_flat(batch, split_special_tokens=True)

        def fastokens_split(out: Any) -> Sequence[Any]:
            return offsets_split((np.frombuffer(out[0], np.uint32), np.frombuffer(out[1], np.uint64)))

        return make_fastokens, fastokens_split
    if lib == "tokie":
        import tokie

        def make_tokie() -> Call:
            tok = tokie.Tokenizer.from_json(path)
            return lambda batch: tok.encode_batch_flat(batch, add_special_tokens=False)

        def tokie_split(out: Any) -> Sequence[Any]:
            ids, lengths = out
            return offsets_split((ids, np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])))

        return make_tokie, tokie_split
    if lib == "riptoken":
        import riptoken

        pattern = rank_pattern(fam, path)

        def make_riptoken() -> Call:
            core = riptoken.CoreBPE(riptoken.load_tiktoken_bpe(path), {}, pattern)
            return core.encode_ordinary_batch  # type: ignore[no-any-return]

        return make_riptoken, lists
    if lib == "bpe-openai":
        from bpe_openai import _bindings

        def make_bpe_openai() -> Call:
            tok = _bindings.tokenizer_for_encoding(path)
            return lambda batch: [tok.encode(text) for text in batch]

        return make_bpe_openai, lists
    if lib == "kitoken":
        import kitoken

        def make_kitoken() -> Call:
            load = {"json": "from_tokenizers_file", "ranks": "from_tiktoken_file"}
            tok = getattr(kitoken.Kitoken, load.get(form, "from_sentencepiece_file"))(path)
            return lambda batch: tok.encode_all(batch, encode_specials=False)

        return make_kitoken, lists
    if lib == "tiktoken":
        import tiktoken

        pattern = rank_pattern(fam, path)

        def make_tiktoken() -> Call:
            ranks = read_ranks(Path(path).read_bytes())  # tiktoken's loader would copy it to a cache
            enc = tiktoken.Encoding(fam.label, pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
            return lambda batch: enc.encode_ordinary_batch(batch, num_threads=threads)

        return make_tiktoken, lists
    if lib == "tokenizers":
        import tokenizers

        def make_tokenizers() -> Call:
            tok = tokenizers.Tokenizer.from_file(path)
            bulk = getattr(tok, "encode_batch_fast", tok.encode_batch)  # _fast (no offsets): >= 0.21
            return lambda batch: bulk(batch, add_special_tokens=False)

        return make_tokenizers, lambda out: [e.ids for e in out]
    if lib == "sentencepiece":
        import sentencepiece

        def make_sentencepiece() -> Call:
            sp = sentencepiece.SentencePieceProcessor(model_file=path)
            return lambda batch: sp.encode(batch, num_threads=threads)

        return make_sentencepiece, lists
    raise SystemExit(f"unknown library {lib!r}: expected one of {', '.join(LIBS + OPTIONAL_LIBS)}")


def rank_pattern(fam: Family, path: str) -> str:
    if fam.pattern is not None:
        return fam.pattern
    pattern: str = tiktoken_spec(str(fam.encoding), Path(path).read_bytes())["pat_str"]
    return pattern


def digest(ids: Any) -> str:
    import numpy as np

    return hashlib.blake2b(np.asarray(ids, dtype=np.uint32).tobytes(), digest_size=8).hexdigest()


@dataclass
class Pass:
    """One pass over the batches: seconds and CPU seconds in the library's calls (the first call
    apart too: work deferred from loading shows there), seconds to build the tokenizer, tokens,
    and each document's digest by batch when kept."""

    seconds: float = 0.0
    cpu: float = 0.0
    first_call: float = 0.0
    load: float = 0.0
    tokens: int = 0
    digests: dict[int, list[str]] = field(default_factory=dict)


def encode_batches(
    make: Callable[[], Call], split: Split, batches: list[tuple[int, list[str]]], keep: bool
) -> Pass:
    t0 = time.perf_counter()
    call = make()
    result = Pass(load=time.perf_counter() - t0)
    for index, batch in batches:
        c0, t0 = time.process_time(), time.perf_counter()
        out = call(batch)
        seconds = time.perf_counter() - t0
        result.cpu += time.process_time() - c0
        result.first_call = result.first_call or seconds
        result.seconds += seconds
        docs = split(out)
        result.tokens += sum(len(ids) for ids in docs)
        if keep:
            result.digests[index] = [digest(ids) for ids in docs]
        del out, docs
    return result


class CannotLoad(Exception):
    pass


def measure_tokenize(task: dict[str, Any]) -> dict[str, Any]:
    make, split = encoder(task)
    texts = load_texts(Path(task["corpus"]))
    batches = [(i, texts[i * BATCH : (i + 1) * BATCH]) for i in range((len(texts) + BATCH - 1) // BATCH)]
    try:
        make()  # a tokenizer the library cannot load is n/a, not a failed run
    except Exception as e:
        raise CannotLoad(f"cannot load it: {type(e).__name__}: {e}") from e
    passes = []
    for p in range(task["passes"]):
        keep = p == task["passes"] - 1  # ids are hashed in one pass, between the timed calls
        gc.collect()
        if task["lib"] in FORKED and task["threads"] > 1:
            passes.append(forked_pass(make, split, batches, task["threads"], keep))
        else:
            passes.append(encode_batches(make, split, batches, keep))
    return {
        "documents": len(texts),
        "text_bytes": sum(len(t.encode("utf-8", "surrogatepass")) for t in texts),
        "tokens": passes[-1].tokens,
        "seconds": [r.seconds for r in passes],
        "cpu_seconds": [r.cpu for r in passes],
        "load_seconds": [r.load for r in passes],
        "first_call_seconds": [r.first_call for r in passes],
        "digests": [d for i in sorted(passes[-1].digests) for d in passes[-1].digests[i]],
    }


def forked_pass(
    make: Callable[[], Call], split: Split, batches: list[tuple[int, list[str]]], n: int, keep: bool
) -> Pass:
    """One pass in ``n`` forked processes, each building its tokenizer and then, all at once,
    encoding every n-th batch. The pass takes as long as the slowest; CPU and tokens add up."""
    children = []
    for k in range(n):
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        out_r, out_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            code = 1
            try:
                for fd in (ready_r, go_w, out_r):
                    os.close(fd)
                mine = batches[k::n]
                built = make()
                os.write(ready_w, b"r")
                os.read(go_r, 1)
                got = encode_batches(lambda built=built: built, split, mine, keep)
                with os.fdopen(out_w, "w") as f:
                    json.dump(asdict(got), f)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        for fd in (ready_w, go_r, out_w):
            os.close(fd)
        children.append((pid, ready_r, go_w, out_r))
    t0 = time.perf_counter()
    for _, ready_r, _, _ in children:
        os.read(ready_r, 1)
    load = time.perf_counter() - t0  # the slowest child's build (they build at once)
    for _, _, go_w, _ in children:
        os.write(go_w, b"g")
    results = []
    for pid, ready_r, go_w, out_r in children:
        with os.fdopen(out_r) as f:
            payload = f.read()
        os.close(ready_r)
        os.close(go_w)
        _, status = os.waitpid(pid, 0)
        if status != 0 or not payload:
            raise RuntimeError(f"a forked encoder exited with status {status}")
        results.append(Pass(**json.loads(payload)))
    return Pass(
        seconds=max(r.seconds for r in results),
        cpu=sum(r.cpu for r in results),
        first_call=max(r.first_call for r in results),
        load=load,
        tokens=sum(r.tokens for r in results),
        digests={int(i): d for r in results for i, d in r.digests.items()},
    )


MEGATRON_DTYPES = {1: "u1", 2: "i1", 3: "<i2", 4: "<i4", 5: "<i8", 6: "<f8", 7: "<f4", 8: "<u2"}


def indexed_digests(prefix: str) -> list[str]:
    """Each sequence's digest, read from a Megatron ``.bin/.idx`` with numpy (not tokshuf)."""
    import numpy as np

    idx = Path(f"{prefix}.idx").read_bytes()
    if idx[:9] != b"MMIDIDX\x00\x00":
        raise RuntimeError(f"{prefix}.idx is not a Megatron index")
    dtype = np.dtype(MEGATRON_DTYPES[idx[17]])
    n = int(np.frombuffer(idx, "<u8", 1, 18)[0])
    sizes = np.frombuffer(idx, "<i4", n, 34)
    pointers = np.frombuffer(idx, "<i8", n, 34 + 4 * n)
    data = np.memmap(f"{prefix}.bin", dtype=np.uint8, mode="r")
    out = []
    for size, pointer in zip(sizes.tolist(), pointers.tolist(), strict=True):
        out.append(digest(data[pointer : pointer + size * dtype.itemsize].view(dtype)))
    return out


def measure_end_to_end(task: dict[str, Any]) -> dict[str, Any]:
    import tokshuf

    fam = FAMILIES[task["family"]]
    spec = fam.tokshuf or task["path"]
    tmp = Path(task["tmp"])
    seconds, cpu = [], []
    digests: list[str] = []
    for p in range(task["passes"]):
        prefix = tmp / f"e2e-{os.getpid()}-{p}"
        gc.collect()
        c0, t0 = time.process_time(), time.perf_counter()
        tokshuf.preprocess(task["corpus"], str(prefix), spec, num_threads=task["threads"], summary=False)
        seconds.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        outputs = [Path(f"{prefix}_text_document.{ext}") for ext in ("bin", "idx")]
        if p == task["passes"] - 1:
            digests = indexed_digests(f"{prefix}_text_document")
        for path in outputs:
            path.unlink()
    return {"seconds": seconds, "cpu_seconds": cpu, "digests": digests}


def worker(task: dict[str, Any]) -> None:
    import resource

    try:
        result = measure_end_to_end(task) if task["mode"] == "e2e" else measure_tokenize(task)
        result["status"] = "ok"
    except CannotLoad as e:
        result = {"status": "n/a", "reason": str(e)[:300]}
    except Exception as e:
        result = {"status": "error", "reason": f"{type(e).__name__}: {e}"[:300]}
        traceback.print_exc()
    usage = (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    )
    result["peak_rss_mb"] = usage / 1024  # KiB on Linux
    Path(task["result"]).write_text(json.dumps(result))


# --- the driver ------------------------------------------------------------------------------


def pinned(threads: int) -> tuple[list[str], Callable[[], None] | None, str]:
    """A command prefix (``taskset``) or a pre-exec hook that keeps a run on ``threads`` cores."""
    cpus = sorted(os.sched_getaffinity(0))
    if threads >= len(cpus):
        return [], None, ""
    chosen = cpus[:threads]
    listed = ",".join(map(str, chosen))
    if shutil.which("taskset"):
        return ["taskset", "-c", listed], None, listed
    return [], lambda: os.sched_setaffinity(0, chosen), listed


def run_worker(task: dict[str, Any], out: Path, pin: bool = True) -> dict[str, Any]:
    threads = task["threads"]
    tmp = out / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    task = {**task, "tmp": str(tmp), "result": str(tmp / f"result-{os.getpid()}.json")}
    prefix, hook, cpus = pinned(threads) if pin else ([], None, "")
    env = dict(
        os.environ,
        RAYON_NUM_THREADS=str(threads),
        FASTOKENS_BPE_THREADS=str(threads),
        TOKENIZERS_PARALLELISM="true" if threads > 1 else "false",
        TOKSHUF_NUM_THREADS=str(threads),
    )
    cmd = [*prefix, sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(task)]
    load = os.getloadavg()[0]
    proc = subprocess.run(cmd, env=env, preexec_fn=hook, check=False, stderr=subprocess.PIPE, text=True)
    result_path = Path(task["result"])
    if result_path.exists():
        result: dict[str, Any] = json.loads(result_path.read_text())
        result_path.unlink()
    else:
        tail = proc.stderr.strip().splitlines()[-1:] if proc.stderr else []
        result = {"status": "error", "reason": f"exit {proc.returncode}: {' '.join(tail)}"[:300]}
    if result["status"] != "ok" and proc.stderr:
        sys.stderr.write(proc.stderr[-3000:])
    result.update(
        {k: task[k] for k in ("lib", "family", "threads", "mode", "form", "path")},
        corpus=task["corpus_label"],
        cpus=cpus,
        load_average=load,
    )
    return result


def reference_digests(
    corpus: Path, label: str, stats: dict[str, Any], name: str, tokenizers: Path, out: Path, threads: int
) -> tuple[str, list[str]] | str:
    """The defining library's per-document digests (cached under ``out/references``), or why not."""
    import importlib.metadata

    fam = FAMILIES[name]
    lib = REFERENCE[fam.form]
    path = tokenizers / str(fam.path(fam.form))
    if not path.exists():
        return f"no {fam.path(fam.form)}"
    try:
        version = importlib.metadata.version(lib)
    except importlib.metadata.PackageNotFoundError:
        return f"{lib} is not installed"
    key = f"{stats['sha256'][:16]}-{name}-{lib}-{version}-{file_sha256(path)[:16]}"
    cache = out / "references" / f"{key}.json"
    if cache.exists():
        return lib, json.loads(cache.read_text())
    print(f"[{label} {name}] reference ids from {lib} ...", file=sys.stderr, flush=True)
    task = {
        "mode": "tokenize", "lib": lib, "family": name, "threads": threads, "passes": 1,
        "form": fam.form, "path": str(path), "corpus": str(corpus), "corpus_label": label,
    }  # fmt: skip
    result = run_worker(task, out, pin=False)
    if result["status"] != "ok":
        return f"{lib} failed: {result.get('reason')}"
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(result["digests"]))
    return lib, result["digests"]


def mismatches(reference: list[str], got: list[str]) -> int:
    return sum(a != b for a, b in zip(reference, got, strict=False)) + abs(len(reference) - len(got))


def merge_rounds(before: dict[str, Any] | None, result: dict[str, Any]) -> dict[str, Any]:
    """One result for two rounds of the same task: every pass of both (a failed round fails it)."""
    if before is None or before["status"] != "ok":
        return before or result
    if result["status"] != "ok":
        return result
    for key in ("seconds", "cpu_seconds", "load_seconds", "first_call_seconds"):
        if key in before:
            result[key] = before[key] + result[key]
    result["peak_rss_mb"] = max(before.get("peak_rss_mb", 0), result.get("peak_rss_mb", 0))
    return result


def summarize(result: dict[str, Any], text_bytes: int) -> None:
    if result.get("status") == "ok":
        median = statistics.median(result["seconds"])
        result["mb_s"] = text_bytes / median / 1e6
        result["cpu_pct"] = 100 * statistics.median(result["cpu_seconds"]) / median
        if "tokens" in result:
            result["mtok_s"] = result["tokens"] / median / 1e6


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--families", default=",".join(DEFAULT_FAMILIES), help=f"of {', '.join(FAMILIES)}")
    p.add_argument("--libs", default=",".join(LIBS), help=f"of {', '.join(LIBS + OPTIONAL_LIBS)}")
    p.add_argument("--threads", default="1,2", help="thread counts, e.g. 1,2")
    p.add_argument("--corpora", default="english,multilingual", help="of english, multilingual")
    p.add_argument("--english-size", default=None, help="default 100MB (--quick: 3MB)")
    p.add_argument("--multilingual-size", default=None, help="default 20MB (--quick: 2MB)")
    p.add_argument("--corpus", type=Path, action="append", help="a JSON-lines file to use instead")
    p.add_argument("--passes", type=int, default=None, help="passes per run (median); default 3, --quick 1")
    p.add_argument(
        "--rounds", type=int, default=1, help="runs of each library, in turn (median of all passes)"
    )
    p.add_argument(
        "--tokenizers",
        type=Path,
        default=os.environ.get("TOKSHUF_BENCH_TOKENIZERS"),
        help="tokenizer files laid out as ../shared/tokenizers ($TOKSHUF_BENCH_TOKENIZERS; default: "
        "unpacked from tests/fixtures)",
    )
    p.add_argument("--no-end-to-end", action="store_true", help="skip tokshuf preprocess")
    p.add_argument("--out", type=Path, default=REPO / "bench-out" / "peers", help="corpora, cache, results")
    p.add_argument("--docs", type=Path, default=None, help="where benchmarks.md and its plots go")
    p.add_argument("--quick", action="store_true", help="small corpora and one pass; docs under --out")
    p.add_argument(
        "--report", type=Path, help="rewrite the page and plots from a results.json; measure nothing"
    )
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return 0
    if args.report:
        stored = json.loads(args.report.read_text())
        print(write_outputs(stored["results"], stored["meta"], None, args.docs or REPO / "docs"))
        return 0

    families = args.families.split(",")
    libs = args.libs.split(",")
    threads_list = [int(t) for t in args.threads.split(",")]
    for name in families:
        if name not in FAMILIES:
            p.error(f"--families: unknown {name!r}; expected some of {', '.join(FAMILIES)}")
    for lib in libs:
        if lib not in LIBS + OPTIONAL_LIBS:
            p.error(f"--libs: unknown {lib!r}; expected some of {', '.join(LIBS + OPTIONAL_LIBS)}")
    if any(FAMILIES[n].form == "model" for n in families) and "sentencepiece" not in libs:
        libs.append("sentencepiece")
    passes = args.passes or (1 if args.quick else 3)
    docs = args.docs or (args.out / "quick" if args.quick else REPO / "docs")
    saved = args.out / ("results-quick.json" if args.quick else "results.json")
    args.out.mkdir(parents=True, exist_ok=True)
    tokenizers = (args.tokenizers or default_tokenizers(args.out, families)).resolve()

    corpora: list[tuple[str, str, Path, str]] = []  # (label, title, path, how it was made)
    if args.corpus:
        corpora = [(c.stem, f"`{c.name}`", c, str(c)) for c in args.corpus]
    else:
        for label in args.corpora.split(","):
            if label not in CORPORA:
                p.error(f"--corpora: unknown {label!r}; expected some of {', '.join(CORPORA)}")
            c = CORPORA[label]
            size = getattr(args, f"{label}_size") or (QUICK_SIZES[label] if args.quick else c.size)
            made = f"tests/fixtures/make_corpus.py OUT.jsonl --size {size} --seed {c.seed}"
            made += f" --mix {c.mix}" if c.mix else ""
            corpora.append((label, f"{c.title}, {size}", make_corpus(c, size, args.out), made))

    installed = {}
    for lib in libs:
        try:
            __import__(MODULES.get(lib, lib))
            installed[lib] = True
        except ImportError:
            installed[lib] = False

    meta: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python benches/bench_peers.py " + shlex.join(sys.argv[1:]),
        "machine": machine(),
        "versions": versions([*libs, "numpy"]),
        "load_average": {"start": os.getloadavg()},
        "passes": passes,
        "rounds": args.rounds,
        "corpora": {},
        "tokenizers": str(tokenizers),
        "libs": libs,
        "families": families,
        "threads": threads_list,
    }
    results: list[dict[str, Any]] = []
    text = ""
    for label, title, path, made in corpora:
        stats = corpus_stats(path)
        meta["corpora"][label] = {"title": title, "path": str(path), "made": made, **stats}
        for name in families:
            ref = reference_digests(path, label, stats, name, tokenizers, args.out, max(threads_list))
            for threads in threads_list:
                tasks = []
                for lib in libs:
                    base = {"lib": lib, "family": name, "threads": threads, "corpus": label}
                    form = form_of(lib, FAMILIES[name], tokenizers)
                    if not installed[lib] or isinstance(form, str):
                        reason = "not installed" if not installed[lib] else form
                        results.append({**base, "mode": "tokenize", "status": "n/a", "reason": reason})
                        continue
                    modes = ["tokenize"]
                    if lib == "tokshuf" and not args.no_end_to_end:
                        modes.append("e2e")
                    for mode in modes:
                        task = {**base, "mode": mode, "passes": passes, "form": form[0], "path": form[1],
                                "corpus": str(path), "corpus_label": label}  # fmt: skip
                        tasks.append(task)
                # Rounds take the libraries in turn, so that a change in the machine's load between
                # them weighs on every library alike rather than on whichever ran then.
                measured: list[dict[str, Any] | None] = [None] * len(tasks)
                for _ in range(args.rounds):
                    for i, task in enumerate(tasks):
                        measured[i] = merge_rounds(measured[i], run_worker(task, args.out))
                for task, result in zip(tasks, measured, strict=True):
                    assert result is not None
                    finish(result, ref, stats, label, nonempty=task["mode"] == "e2e")
                    results.append(result)
            # after each tokenizer, so that a long run shows (and keeps) what it has measured
            text = write_outputs(results, meta, saved, docs)
    print(text)
    print(f"wrote {docs / 'benchmarks.md'}", file=sys.stderr)
    ours = [r for r in results if r["lib"] == "tokshuf" and r["status"] in ("ok", "error")]
    bad = [r for r in ours if r["status"] == "error" or r.get("mismatching_docs")]
    return 1 if bad else 0


def write_outputs(results: list[dict[str, Any]], meta: dict[str, Any], saved: Path | None, docs: Path) -> str:
    """The results (to ``saved`` unless None), the plots and ``benchmarks.md`` (returned)."""
    if saved is not None:
        meta["load_average"]["end"] = os.getloadavg()
        saved.write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    docs.mkdir(parents=True, exist_ok=True)
    plots = {}
    for label in meta["corpora"]:
        path = docs / f"benchmarks-{label}.png"
        if plot(results, meta, label, path):
            plots[label] = path.name
    text = report(results, meta, plots)
    (docs / "benchmarks.md").write_text(text)
    return text


def finish(
    result: dict[str, Any],
    ref: tuple[str, list[str]] | str,
    stats: dict[str, Any],
    label: str,
    nonempty: bool = False,
) -> None:
    """Rates, the comparison with the reference ids, a progress line; drops the digests."""
    summarize(result, stats["text_bytes"])
    digests = result.pop("digests", None)
    if result["status"] == "ok" and digests is not None and not isinstance(ref, str):
        reference = ref[1]
        if nonempty:  # a document with no tokens has no sequence in a .bin/.idx
            empty = digest([])
            reference = [d for d in reference if d != empty]
        result["mismatching_docs"] = mismatches(reference, digests)
        result["compared_docs"] = len(reference)
        result["reference"] = ref[0]
    elif isinstance(ref, str):
        result["reference_missing"] = ref
    what = "preprocess" if result["mode"] == "e2e" else result["lib"]
    head = f"[{label} {result['family']} {result['threads']}t] {what}:"
    if result["status"] == "ok":
        rounds = " ".join(f"{s:.2f}" for s in result["seconds"])
        ids = (
            f", {result['mismatching_docs']} of {result['compared_docs']} documents differ"
            if "mismatching_docs" in result
            else ""
        )
        print(f"{head} {result['mb_s']:.1f} MB/s (passes {rounds} s){ids}", file=sys.stderr, flush=True)
    else:
        print(f"{head} {result['status']}: {result.get('reason')}", file=sys.stderr, flush=True)


# --- what the machine and libraries are ---------------------------------------------------------


def machine() -> dict[str, Any]:
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "memory_gib": round(memory / 2**30, 1) if memory else None,
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def versions(libs: Sequence[str]) -> dict[str, str]:
    import importlib.metadata

    out = {}
    for lib in libs:
        if lib == "tokshuf":
            import tokshuf

            commit = subprocess.run(
                ["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                capture_output=True, text=True, check=False,
            ).stdout.strip()  # fmt: skip
            core = Path(tokshuf._core.__file__)
            out[lib] = (
                f"{getattr(tokshuf, '__version__', '?')} ({commit or 'no git'}, {core.name} of {core.parent})"
            )
            continue
        try:
            out[lib] = importlib.metadata.version(lib)
        except importlib.metadata.PackageNotFoundError:
            out[lib] = "not installed"
    return out


# --- the report ---------------------------------------------------------------------------------


def shown_libs(results: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    ran = {r["lib"] for r in results if r["status"] != "n/a" or r["lib"] in LIBS}
    return [lib for lib in meta["libs"] if lib in ran]


def index(results: list[dict[str, Any]]) -> dict[tuple[str, str, str, int, str], dict[str, Any]]:
    return {(r["corpus"], r["family"], r["lib"], r["threads"], r["mode"]): r for r in results}


def cell(r: dict[str, Any] | None, base: dict[str, Any] | None) -> str:
    if r is None:
        return ""
    if r["status"] == "n/a":
        return "n/a"
    if r["status"] != "ok":
        return "error"
    text = f"{r['mb_s']:.1f}"
    if base is not None and base.get("status") == "ok" and base is not r:
        text += f" ({r['mb_s'] / base['mb_s']:.2f}x)"
    if r["lib"] in FORKED and r["threads"] > 1 and r["mode"] == "tokenize":
        text += " †"
    if r.get("mismatching_docs"):
        text += " ≠"
    return text


def page_header(
    title: str, script: str, what: str, meta: dict[str, Any], results: list[dict[str, Any]], busy_reads: str
) -> list[str]:
    """The head of a benchmark page: its title, how to regenerate it, and where and when it ran
    (``busy_reads``: how a busy machine skews the figures, ``low`` for rates, ``high`` for times)."""
    m = meta["machine"]
    load = meta["load_average"]
    loads = [r["load_average"] for r in results if "load_average" in r]
    return [
        f"# Benchmarks: {title}",
        "",
        f"Written by `benches/{script}` (its docstring has the method); rerun the command below",
        f"to regenerate {what}. Do not edit by hand.",
        "",
        f"- Command: `{meta['command']}`",
        f"- Date: {meta['date']}",
        f"- Machine: {m['cpu']}, {m['cores']} cores usable ({m['cpu_count']} CPUs), "
        f"{m['memory_gib']} GiB; {m['os']}; Python {m['python']}",
        f"- Load average (1 min): {load['start'][0]:.2f} at the start, "
        + (f"{min(loads):.2f}-{max(loads):.2f} before the runs, " if loads else "")
        + f"{load['end'][0]:.2f} at the end (on a busy machine every figure reads {busy_reads})",
        f"- Versions: {', '.join(f'{k} {v}' for k, v in meta['versions'].items())}",
        f"- Tokenizer files: `{shown_path(meta['tokenizers'])}`",
    ]


def rounds_text(meta: dict[str, Any]) -> str:
    """How many rounds of each run, where there were several (runs saved before had one)."""
    rounds = meta.get("rounds", 1)
    return f" in each of {rounds} rounds that take the libraries in turn" if rounds > 1 else ""


def report(results: list[dict[str, Any]], meta: dict[str, Any], plots: dict[str, str]) -> str:
    by = index(results)
    libs = shown_libs(results, meta)
    lines = [
        *page_header(
            "tokenizers side by side", "bench_peers.py", "this page and its plots", meta, results, "low"
        ),
        "",
        "Method: each (library, tokenizer, threads, corpus) runs in its own process, pinned to as many "
        "cores as threads; the median of "
        f"{meta['passes']} pass{'es' if meta['passes'] > 1 else ''}{rounds_text(meta)}, each with a freshly "
        "built tokenizer "
        "(cold caches). MB = 10^6 bytes of UTF-8 text. Tokenize only: the texts are preloaded in Python, "
        "1,000 per call, and only the call is timed (work a library defers from loading to its first "
        "call counts). End to end: `tokshuf.preprocess` from the JSON-lines "
        "file to `.bin/.idx`, loading the tokenizer included; no peer reads JSON lines into ids (tokie's "
        "`encode_files` reads plain text split at a separator), so theirs is n/a. Ids are compared per "
        "document with the defining library (tiktoken for rank files, "
        "`tokenizers` for `tokenizer.json`, sentencepiece for `.model`).",
        "",
        "Calls: " + "; ".join(f"{lib} {API[lib]}" for lib in libs) + ".",
        "",
        "Cells: MB/s (x fastokens, same tokenizer, threads and corpus). † N forked processes (the library "
        "has no parallel bulk call); ≠ ids differ from the defining library on some documents (see Ids); "
        "n/a: the library cannot run this tokenizer (see Not run).",
    ]
    for label, info in meta["corpora"].items():
        lines += [
            "",
            f"## {info['title']} corpus",
            "",
            f"`{info['made']}`: {info['documents']:,} documents, {info['text_bytes'] / 1e6:.1f} MB of text "
            f"(JSON lines sha256 `{info['sha256'][:16]}…`).",
            "",
        ]
        head = ["tokenizer", "threads", *libs]
        e2e = any(r["mode"] == "e2e" and r["corpus"] == label for r in results)
        if e2e:
            head += ["tokshuf `preprocess` end to end"]
        lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for name in meta["families"]:
            for threads in meta["threads"]:
                base = by.get((label, name, "fastokens", threads, "tokenize"))
                row = [FAMILIES[name].label, str(threads)]
                row += [cell(by.get((label, name, lib, threads, "tokenize")), base) for lib in libs]
                if e2e:
                    row.append(cell(by.get((label, name, "tokshuf", threads, "e2e")), base))
                lines.append("| " + " | ".join(row) + " |")
        if label in plots:
            lines += ["", f"![{info['title']}]({plots[label]})"]
    lines += families_section(results, meta)
    lines += ids_section(results, meta, libs)
    lines += startup_section(results, meta, libs)
    other = sorted(
        {
            (r["lib"], FAMILIES[r["family"]].label, f"`{Path(r['path']).relative_to(meta['tokenizers'])}`")
            for r in results
            if r["status"] == "ok" and r["form"] not in (FAMILIES[r["family"]].form, "embedded")
        }
    )
    if other:
        lines += ["", "Read from another file than the defining one (the same tokenizer):"]
        lines += [f"- {lib}, {fam}: {path}" for lib, fam, path in other]
    not_run: dict[tuple[str, str, str], list[str]] = {}
    for r in results:
        if r["status"] in ("n/a", "error"):
            fams = not_run.setdefault((r["lib"], r["status"], r.get("reason", "")), [])
            if FAMILIES[r["family"]].label not in fams:
                fams.append(FAMILIES[r["family"]].label)
    if not_run:
        lines += ["", "## Not run", ""]
        lines += [
            f"- {lib} {', '.join(fams)}: {'failed: ' if status == 'error' else ''}{reason}"
            for (lib, status, reason), fams in sorted(not_run.items())
        ]
    return "\n".join(lines) + "\n"


def shown_path(path: str) -> str:
    """``path`` relative to the repository when it is inside it (the page is not about this machine)."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(REPO)) if resolved.is_relative_to(REPO) else path


def families_section(results: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    """tokshuf's rate on each tokenizer as a fraction of its cl100k rate in the same run."""
    if "cl100k" not in meta["families"] or len(meta["families"]) < 2:
        return []
    by = index(results)
    modes = [("tokenize", "tokenize only"), ("e2e", "`preprocess`")]
    cols = [(m, t, f"{name}, {t} thr") for m, name in modes for t in meta["threads"]]
    lines = [
        "",
        "## tokshuf across tokenizers",
        "",
        "MB/s (x cl100k: the same corpus, threads and measurement).",
        "",
        "| corpus | tokenizer | " + " | ".join(c[2] for c in cols) + " |",
        "|" + " --- |" * (2 + len(cols)),
    ]
    for label in meta["corpora"]:
        for name in meta["families"]:
            row = [label, FAMILIES[name].label]
            for mode, threads, _ in cols:
                r = by.get((label, name, "tokshuf", threads, mode))
                base = by.get((label, "cl100k", "tokshuf", threads, mode))
                row.append(cell(r, base) if name != "cl100k" else cell(r, None))
            lines.append("| " + " | ".join(row) + " |")
    return lines


def ids_section(results: list[dict[str, Any]], meta: dict[str, Any], libs: list[str]) -> list[str]:
    cols = [*libs, "tokshuf `preprocess`"]
    lines = [
        "",
        "## Ids",
        "",
        "Documents whose ids differ from the defining library's, of those compared (the most over the "
        "thread counts); empty: not run.",
        "",
        "| corpus | tokenizer | reference | " + " | ".join(cols) + " |",
        "|" + " --- |" * (3 + len(cols)),
    ]
    for label in meta["corpora"]:
        for name in meta["families"]:
            rows = [r for r in results if r["corpus"] == label and r["family"] == name]
            ref = next((r["reference"] for r in rows if "reference" in r), None)
            missing = next((r["reference_missing"] for r in rows if "reference_missing" in r), None)
            row = [label, FAMILIES[name].label, ref or (f"none: {missing}" if missing else "")]
            for col in cols:
                lib, mode = ("tokshuf", "e2e") if col.startswith("tokshuf `") else (col, "tokenize")
                got = [r for r in rows if r["lib"] == lib and r["mode"] == mode and "mismatching_docs" in r]
                if not got:
                    row.append("")
                    continue
                worst = max(got, key=lambda r: r["mismatching_docs"])
                bad = worst["mismatching_docs"]
                row.append(f"**{bad:,}** of {worst['compared_docs']:,}" if bad else "0")
            lines.append("| " + " | ".join(row) + " |")
    return lines


def startup_section(results: list[dict[str, Any]], meta: dict[str, Any], libs: list[str]) -> list[str]:
    fewest = min(meta["threads"])
    lines = [
        "",
        "## Loading the tokenizer",
        "",
        "Seconds to build a tokenizer from its file, and (after the +) how much longer the first call "
        "took than the average of the others: work deferred from loading (medians over every pass at "
        f"{fewest} thread{'s' if fewest > 1 else ''}).",
        "",
        "| tokenizer | " + " | ".join(libs) + " |",
        "|" + " --- |" * (1 + len(libs)),
    ]
    for name in meta["families"]:
        row = [FAMILIES[name].label]
        for lib in libs:
            loads, extra = [], []
            for r in results:
                if (r["family"], r["lib"], r["status"], r["mode"], r["threads"]) != (
                    name, lib, "ok", "tokenize", fewest,
                ):  # fmt: skip
                    continue
                calls = -(-r["documents"] // BATCH)
                loads += r["load_seconds"]
                for total, first in zip(r["seconds"], r["first_call_seconds"], strict=True):
                    # below 0: the first batch was simply shorter (nothing deferred to measure)
                    extra.append(max(0.0, first - (total - first) / (calls - 1)) if calls > 1 else first)
            row.append(f"{statistics.median(loads):.3f} + {statistics.median(extra):.3f}" if loads else "")
        lines.append("| " + " | ".join(row) + " |")
    return lines


def plot(results: list[dict[str, Any]], meta: dict[str, Any], label: str, path: Path) -> bool:
    """Grouped bars of MB/s (log scale) per tokenizer, one panel per thread count."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return False
    by = index(results)
    series = [(lib, "tokenize", lib) for lib in shown_libs(results, meta)]
    if any(r["mode"] == "e2e" and r["corpus"] == label for r in results):
        series.append(("tokshuf", "e2e", "tokshuf preprocess (end to end)"))
    families = meta["families"]
    threads_list = meta["threads"]
    fig, axes = plt.subplots(
        1, len(threads_list), figsize=(6.5 * len(threads_list), 1.6 + 0.25 * len(series) * len(families)),
        sharey=True, squeeze=False, layout="constrained",
    )  # fmt: skip
    colors = plt.get_cmap("tab10")
    height = 0.8 / len(series)
    legend: dict[str, Any] = {}
    for ax, threads in zip(axes[0], threads_list, strict=True):
        for j, (lib, mode, name) in enumerate(series):
            ys, xs, flags = [], [], []
            for i, fam in enumerate(families):
                r = by.get((label, fam, lib, threads, mode))
                if r is not None and r["status"] == "ok":
                    ys.append(i + (j - (len(series) - 1) / 2) * height)
                    xs.append(r["mb_s"])
                    flags.append(bool(r.get("mismatching_docs")))
            if not xs:
                continue
            bars = ax.barh(ys, xs, height=height, color=colors(j % 10), label=name)
            legend.setdefault(name, Patch(color=colors(j % 10)))
            for bar, flagged, x in zip(bars, flags, xs, strict=True):
                if flagged:
                    bar.set_hatch("///")
                mark = (" †" if lib in FORKED and threads > 1 and mode == "tokenize" else "") + (
                    " ≠" if flagged else ""
                )
                ax.text(x * 1.04, bar.get_y() + height / 2, f"{x:.3g}{mark}", va="center", fontsize=6)
        ax.set_xscale("log")
        ax.set_title(f"{threads} thread{'s' if threads > 1 else ''}", fontsize=10)
        ax.set_xlabel("MB/s of text (log scale); hatched, ≠: ids differ; †: forked processes")
        ax.set_yticks(range(len(families)), [FAMILIES[f].label for f in families])
        ax.set_ylim(len(families) - 0.5, -0.5)
        ax.grid(axis="x", which="both", alpha=0.3)
    info = meta["corpora"][label]
    fig.suptitle(f"{info['title']} corpus; {meta['machine']['cpu']}, {meta['date']}", fontsize=10)
    names = [name for _, _, name in series if name in legend]
    fig.legend(
        [legend[n] for n in names], names, loc="outside lower center", ncol=min(5, len(names)), fontsize=8
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


if __name__ == "__main__":
    sys.exit(main())
