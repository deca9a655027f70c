"""Golden outputs across commands: preprocess, merge (--input and --parts), shuffle (one node, in
tasks, both member formats), olmo-convert and instances on one small generated corpus.

The sha256 of every data file is pinned (recorded from main before the ingest and shuffle
refactors of issue 41): a refactor that changes one output byte fails here. Summaries and commit
records are not hashed (they carry times and the tool's version); their data members are
compared instead. So that the digests pin behaviour and not only stability, the outputs are also
read back with independent readers (numpy following Megatron's .idx layout, Python's tarfile and
gzip, the ``tokenizers`` package for the ids) and checked against a model of each command.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import itertools
import json
import os
import random
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import FIXTURES, write_jsonl
from megatron_idx import parse_idx

from tokshuf.cli import main

tokenizers = pytest.importorskip("tokenizers")

GPT2 = FIXTURES / "gpt2"
EOT = 50256  # GPT-2's <|endoftext|>
CONTEXT = 65
CHUNK = 16

#: The data members of both shuffle summaries.
SHUFFLE_SUMMARY = {
    "files": 4,
    "documents": 87,
    "contexts": 128,
    "tokens": 8166,
    "pad_tokens": 154,
    "shards": 8,
    "special_tokens": {"bos": None, "eot": 50256, "pad": 50256},
}

#: sha256 of every data file, by its path relative to the run's directory (the instance index's
#: cache entry named by its kind). Regenerate: GOLDEN_PRINT=1 pytest tests/test_golden_outputs.py -s
EXPECTED: dict[str, str] = {
    "instances/boundary/difference.bin": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "instances/documents/spans.bin": "cdd2f71e25bff6fcfc1dda73dbb1be133184d69ac0e8373db022344f34461d95",
    "instances/packed/doc_ids.bin": "ea578c72e3827ee11f78e771b236800f9650df41859ac72ae903a72d7fe13705",
    "instances/packed/docs.bin": "6980a68a5051c572cdb18b9d9d821548b0d129a36d02ef66aa797afcab5d0ea8",
    "instances/packed/offsets.bin": "09aacd5b92d9158bd674faa9d768bc1ef2520db20f87e37789a5982dd45d32e5",
    "instances/vsl/bucket16.bin": "98ca4fc91a46426490e93ed1927603ef1c4e1868fc05faa4fba0fcb867ee1973",
    "instances/vsl/bucket32.bin": "62895df6ab869a745d95e9313e2826f9acf74c45ef19ce52cb7cdce481bbc61b",
    "instances/vsl/bucket64.bin": "d0ea55c4f3d8f1d328b3b11f5a7de1db98cc2da9e69143f085677a79c5ca7c96",
    "instances/vsl/spans.bin": "ab252f8cc021c823ca865d5bea0a8a896e2c3334b33a174332bc56dcfbb5c3fc",
    "merged.bin": "01d286396ca2896d9515249e32c97f4138977b3a63d985d592a4c5fed1bffdf3",
    "merged.idx": "5bb3e779b6cd8d79952f3643180bb887b73148d2e8c848bbc88e3cd62bf51388",
    "pp_text_document.bin": "76b3bda6427c2cb78e380aa3ec23b3c9d5078b90e1382e0b2654fb0b7d1ffaef",
    "pp_text_document.idx": "0ad9df969f50db6f57e38eb4ea84ae69a6ea4bcebb7b8e13e9c26a4376513eeb",
    "pp_title_document.bin": "00032f72fdb12e8082ef837b599d5f0871eccd5f8a517296e0bb3d2c8129bf63",
    "pp_title_document.idx": "e3f3fcb6d1b5a32936d7413252a13807bec6a4b4b6c136ba1e9f86a822d86b4d",
    "shuf/manifest.jsonl": "4837cf202d022dbe3a803e1f910e53711947ce760da40d1f42cfcec61982f51d",
    "shuf/shard_00000000.tar": "511a8ab52acfb97a7335016333e92122d5fdb8ea4030932e51973a83b546e498",
    "shuf/shard_00000001.tar": "317e3fc03f67d4e9b1a402df17fd61ba2e1335c2915ff267af3c0b4e7a0c9b1e",
    "shuf/shard_00000002.tar": "29b529a03b0c6b95f9874efef52711ed5d214227b3a21d2d0d46974d5672f0a7",
    "shuf/shard_00000003.tar": "97c961e61df2ff5b36b58e7f2ef18657a066d7d29683caa9a2585c1244e7204f",
    "shuf/shard_00000004.tar": "7c37ba215a8cae3df72f890891f369170acbbf392480756e6233f1acdd0e88cb",
    "shuf/shard_00000005.tar": "aae2c7c475567a2f7260512499721218e9b9153186f2595fe49b3b3389c3aad2",
    "shuf/shard_00000006.tar": "78ad07a1f11e07b22b014741c5f425edda197cf6ec4da0e46c4979345b3dc9c7",
    "shuf/shard_00000007.tar": "f39dd99f378655b52aa80aff67eef625ca439ad27939007810a0e894461147cd",
    "shuf_npy/manifest.jsonl": "4837cf202d022dbe3a803e1f910e53711947ce760da40d1f42cfcec61982f51d",
    "shuf_npy/shard_00000000.tar": "00d9b6d1627c08cf524cc7cf1487e66406dea68dfb76a431e730696a49214b64",
    "shuf_npy/shard_00000001.tar": "59969649854154304737732ddb101cef39b3ba0ac48fd663cf3c022a461e6b64",
    "shuf_npy/shard_00000002.tar": "0561d2a9ea0266c65880026225bab514c57a5c28422dae8a0c9cc213eeb63340",
    "shuf_npy/shard_00000003.tar": "deabfd3bd495ba5bca4bc8ccdf9721f2bbc6e6667fc7cfe458d0951e8f9176f0",
    "shuf_npy/shard_00000004.tar": "ffea2d33190556892c45f5989b91ad9d477a2336beea8256d02e3caafd8302b4",
    "shuf_npy/shard_00000005.tar": "0e5c733ea2c6e1b1b6e4945fb7213cfe5fa492927449937d7421a929b94b9bd4",
    "shuf_npy/shard_00000006.tar": "121a57c08e626b902d7ebd1b1168a83da078cc61f9ea299e4415db64e40568f7",
    "shuf_npy/shard_00000007.tar": "deeecbf75a2ce7f001589c0e23a13f552d0ed8f1763fc889a2eb075796fcf5b1",
    "tokens.csv (decompressed, SRC)": "5538a94394d3de89e9f8711b536314e51ee3b48d93d9fa057f777f3a36f5f454",
    "tokens.npy": "cff7bc88530a8f96f9ad769833a3fea854ee044671027123261e2e47de1ca737",
}


def _corpus(root: Path) -> list[Path]:
    """Four files (plain, gzip, zstd, plain) of documents with a "text" and a "title" key: ASCII,
    accents, CJK, emoji, escapes, empty texts, long documents that span several contexts."""
    rng = random.Random(41)
    words = [
        "the",
        "data",
        "token",
        "shuffle",
        "Ärger",
        "café",
        "漢字",
        "🙂",
        "naïve",
        "x\\y",
        'q"uote',
        "\t",
    ]
    paths = []
    for i, compress in enumerate([None, "gz", "zst", None]):
        docs = []
        for j in range(rng.randint(15, 40)):
            n = rng.choice([0, 1, rng.randint(2, 30), rng.randint(30, 400)])
            text = " ".join(rng.choice(words) for _ in range(n))
            if j % 7 == 3:
                text += "\n\nA second paragraph.\n"
            docs.append({"id": f"{i}-{j}", "text": text, "title": f"Doc {i}.{j} {rng.choice(words)}"})
        suffix = {None: ".jsonl", "gz": ".jsonl.gz", "zst": ".jsonl.zst"}[compress]
        paths.append(write_jsonl(root / f"part_{i}{suffix}", docs, compress))
    return paths


def _docs(paths: list[Path]) -> list[list[dict[str, Any]]]:
    """Each file's records, read with the standard library."""
    out = []
    for p in paths:
        data = p.read_bytes()
        if p.suffix == ".gz":
            data = gzip.decompress(data)
        elif p.suffix == ".zst":
            import zstandard

            data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
        out.append([json.loads(line) for line in data.decode().splitlines()])
    return out


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(*argv: str) -> dict[str, Any]:
    import contextlib

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main([*argv, "--json"]) == 0
    return json.loads(buf.getvalue()) if buf.getvalue().strip() else {}


def _read_bin(prefix: Path) -> list[list[int]]:
    """Documents of a .bin/.idx pair, read with numpy from Megatron's layout."""
    idx = parse_idx(f"{prefix}.idx")
    data = np.fromfile(f"{prefix}.bin", idx["dtype"])
    itemsize = idx["dtype"].itemsize
    seqs = [
        data[p // itemsize : p // itemsize + n].tolist()
        for p, n in zip(idx["pointers"], idx["lengths"], strict=True)
    ]
    bounds = idx["document_indices"].tolist()
    return [[t for s in seqs[a:b] for t in s] for a, b in itertools.pairwise(bounds)]


def _contexts(out: Path) -> tuple[list[str], list[tuple[int, ...]]]:
    """(manifest shard names, every context of every shard in order), with tarfile and gzip."""
    rows = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    contexts: list[tuple[int, ...]] = []
    for row in rows:
        with tarfile.open(out / f"{row['shard']}.tar") as t:
            members = t.getmembers()
            assert row["num_sequences"] == len(members)
            for m in members:
                raw = t.extractfile(m).read()  # type: ignore[union-attr]
                if m.name.endswith(".json.gz"):
                    ids = json.loads(gzip.decompress(raw))
                else:
                    assert m.name.endswith(".npy")
                    ids = np.load(io.BytesIO(raw)).tolist()
                contexts.append(tuple(ids))
    return [r["shard"] for r in rows], contexts


def test_golden_outputs_across_commands(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    files = _corpus(corpus)
    files_docs = _docs(files)
    tok = tokenizers.Tokenizer.from_file(str(GPT2 / "tokenizer.json"))
    enc = {key: [[tok.encode(d[key]).ids for d in docs] for docs in files_docs] for key in ("text", "title")}
    out = tmp_path / "out"
    out.mkdir()
    digests: dict[str, str] = {}

    def pin(*names: str) -> None:
        for name in names:
            digests[name] = _sha(out / name)

    # preprocess: two keys, EOD appended, two threads or one: the same bytes.
    common = ["--input", str(corpus), "--tokenizer", str(GPT2), "--json-keys", "text", "title"]
    pre = _run("preprocess", *common, "--output-prefix", str(out / "pp"), "--append-eod", "--workers", "2")
    assert [o["documents"] for o in pre["outputs"]] == [sum(map(len, files_docs))] * 2
    # The summary's data members (not its times and version): documents, sequences, tokens per key.
    assert [(o["documents"], o["sequences"], o["tokens"]) for o in pre["outputs"]] == [
        (87, 63, 8142),
        (87, 87, 609),
    ]
    for key in ("text", "title"):
        pin(f"pp_{key}_document.bin", f"pp_{key}_document.idx")
        want = [[*ids, EOT] if ids else [] for per_file in enc[key] for ids in per_file]
        got = _read_bin(out / f"pp_{key}_document")
        assert got == want, key
        assert parse_idx(out / f"pp_{key}_document.idx")["dtype"] == np.uint16
    one = tmp_path / "one"
    _run("preprocess", *common, "--output-prefix", str(one / "pp"), "--append-eod", "--workers", "1")
    for key in ("text", "title"):
        for ext in ("bin", "idx"):
            assert _sha(one / f"pp_{key}_document.{ext}") == digests[f"pp_{key}_document.{ext}"]

    # preprocess in two tasks, then merge --parts: the one-run bytes (and the same counts).
    for task in ("0/2", "1/2"):
        _run("preprocess", *common, "--output-prefix", str(out / "parts"), "--append-eod", "--shard", task)
    parts = _run("merge", "--parts", str(out / "parts"))
    for key in ("text", "title"):
        for ext in ("bin", "idx"):
            assert _sha(out / f"parts_{key}_document.{ext}") == digests[f"pp_{key}_document.{ext}"]
    assert [o["documents"] for o in parts["outputs"]] == [o["documents"] for o in pre["outputs"]]

    # merge --input: text's documents, then title's.
    _run(
        "merge",
        "--input",
        str(out / "pp_text_document"),
        str(out / "pp_title_document"),
        "--output-prefix",
        str(out / "merged"),
    )
    pin("merged.bin", "merged.idx")
    assert _read_bin(out / "merged") == _read_bin(out / "pp_text_document") + _read_bin(
        out / "pp_title_document"
    )

    # shuffle, one node: json.gz (open_lm) members, then npy members; in tasks: the same bytes.
    shuffle = ["shuffle", "--input", str(corpus), "--tokenizer", str(GPT2), "--context-length", str(CONTEXT)]
    shuffle += ["--wds-chunk-size", str(CHUNK), "--num-local-cells", "3", "--seed", "7", "--threads", "2"]
    runs = {
        "shuf": [],
        "shuf_npy": ["--member-format", "npy"],
    }
    model = []  # tokshuf-rust's contexts, per file: ids + EOT per document, the rest padded with EOT
    for per_file in enc["text"]:
        buf: list[int] = []
        for ids in per_file:
            buf += [*ids, EOT]
            while len(buf) >= CONTEXT:
                model.append(tuple(buf[:CONTEXT]))
                del buf[:CONTEXT]
        if buf:
            model.append(tuple(buf + [EOT] * (CONTEXT - len(buf))))
    for name, extra in runs.items():
        summary = _run(
            *shuffle, "--local-cell-dir", str(tmp_path / f"cells_{name}"), "--output", str(out / name), *extra
        )
        shards, contexts = _contexts(out / name)
        assert sorted(contexts) == sorted(model)
        assert contexts != model  # shuffled
        assert summary["contexts"] == len(model)
        assert summary["shards"] == len(shards)
        kept = ("files", "documents", "contexts", "tokens", "pad_tokens", "shards", "special_tokens")
        assert {k: summary[k] for k in kept} == SHUFFLE_SUMMARY
        assert shards == [f"shard_{i:08d}" for i in range(len(shards))]
        pin(f"{name}/manifest.jsonl", *(f"{name}/{s}.tar" for s in shards))
        assert {p.name for p in (out / name).iterdir()} >= {"manifest.jsonl", "summary.json"}
        if name == "shuf":
            json_contexts = contexts
        else:
            assert contexts == json_contexts  # the member format changes the encoding only
    staged = out / "staged"
    cells = tmp_path / "cells_staged"
    for stage, task in (("cells", "0/2"), ("cells", "1/2"), ("shards", "0/2"), ("shards", "1/2")):
        _run(
            *shuffle,
            "--local-cell-dir",
            str(cells),
            "--output",
            str(staged),
            "--stage",
            stage,
            "--task",
            task,
        )
    _run(*shuffle, "--local-cell-dir", str(cells), "--output", str(staged), "--stage", "manifest")
    for f in (out / "shuf").iterdir():
        if f.suffix in (".tar", ".jsonl"):
            assert _sha(staged / f.name) == _sha(f), f.name

    # olmo-convert: the text documents with an EOS after each, and their Dolma metadata.
    _run(
        "olmo-convert",
        "--input",
        str(out / "pp_text_document"),
        "--output",
        str(out / "tokens.npy"),
        "--append-eos",
        str(EOT),
    )
    pin("tokens.npy")
    # (an EOS is added to the documents that do not end with one: the empty ones here)
    want_tokens = [
        t for ids in _read_bin(out / "pp_text_document") for t in (ids if ids[-1:] == [EOT] else [*ids, EOT])
    ]
    assert np.fromfile(out / "tokens.npy", np.uint16).tolist() == want_tokens
    rows = gzip.decompress((out / "tokens.csv.gz").read_bytes()).decode().splitlines()
    assert len(rows) == sum(map(len, files_docs))
    # start,end,id,source,line: the source is the input's absolute path (replaced here by SRC)
    ends = np.cumsum(
        [len(ids) if ids[-1:] == [EOT] else len(ids) + 1 for ids in _read_bin(out / "pp_text_document")]
    )
    src = str(out / "pp_text_document")
    assert [r.split(",")[:2] for r in rows] == [[str(a), str(b)] for a, b in itertools.pairwise([0, *ends])]
    rows = [r.replace(src, "SRC") for r in rows]
    digests["tokens.csv (decompressed, SRC)"] = hashlib.sha256("\n".join(rows).encode()).hexdigest()

    # instances: the index files of three strategies over the token file.
    cache = tmp_path / "cache"
    for strategy, extra in (
        ("fsl", []),
        ("packed", []),
        ("vsl", ["--min-sequence-length", "16"]),
    ):
        summary = _run(
            "instances",
            str(out / "tokens.npy"),
            "--strategy",
            strategy,
            "--sequence-length",
            "64",
            "--eos-token-id",
            str(EOT),
            "--pad-token-id",
            str(EOT),
            "--dtype",
            "uint16",
            "--cache-dir",
            str(cache),
            *extra,
        )
        assert summary["instances"] > 0
    # The index files (not their meta.json), by the kind of cache entry (its key depends on paths).
    entries = sorted(d for d in (cache / "instances").iterdir() if d.is_dir() and not d.name.startswith("."))
    kinds = [d.name.rsplit("-", 1)[0] for d in entries]
    assert sorted(kinds) == ["boundary-check", "documents", "packed", "vsl"]
    for kind, d in zip(kinds, entries, strict=True):
        for f in sorted(d.glob("*.bin")):
            digests[f"instances/{kind.split('-')[0]}/{f.name}"] = _sha(f)

    if not EXPECTED or os.environ.get("GOLDEN_PRINT"):
        print(json.dumps(digests, indent=4, sort_keys=True))
    assert digests == EXPECTED
