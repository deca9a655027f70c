"""A small end-to-end run: generate a corpus, preprocess it, read the result back, build Nanosets,
shuffle it into open_lm shards and read those back. Every number printed is also checked against
one computed here from the corpus, so a broken pipeline fails the run (exit status 1).

Run with ``make example`` (which installs the package first, without torch).
"""

from __future__ import annotations

import gzip
import json
import random
import tarfile
import tempfile
from pathlib import Path

import tokshuf

WORDS = "the of and to in is that for it as with was on be by this are from at or an".split()  # noqa: SIM905
SEQLEN = 2049


def make_corpus(path: Path, docs: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 400))) for _ in range(docs)]
    with path.open("w", encoding="utf-8") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({"id": i, "text": text}) + "\n")
    return texts


def check(ok: bool, what: str) -> None:
    if not ok:
        raise SystemExit(f"quickstart: FAILED: {what}")


def main() -> None:
    out = Path(tempfile.mkdtemp(prefix="tokshuf-example-"))
    corpus = out / "corpus.jsonl"
    texts = make_corpus(corpus, 2000)
    # The byte tokenizer is UTF-8 byte + 1, and eod 0 ends every document that has tokens.
    expected_tokens = sum(len(t.encode()) + 1 for t in texts if t)

    summary = tokshuf.preprocess(corpus, out / "corpus", "byte", ["text"], append_eod=True, num_threads=2)
    ds = tokshuf.IndexedDataset(out / "corpus_text_document")
    secs = summary["seconds"]
    print(f"preprocess: {summary['documents']} documents, {ds.num_tokens:,} tokens in {secs:.2f}s")
    check(summary["documents"] == len(texts), f"{summary['documents']} documents, not {len(texts)}")
    check(ds.num_tokens == expected_tokens, f"{ds.num_tokens} tokens, not {expected_tokens}")
    first = next(t for t in texts if t)
    check(ds[0].tolist() == [b + 1 for b in first.encode()] + [0], "the first sequence differs from its text")
    print(f"  {ds!r}")
    print(f"  first sequence starts with ids {ds[0][:8].tolist()}")

    cfg = tokshuf.NanosetConfig(ds.prefix, sequence_length=128, cache_dir=str(out / "cache"))
    train, valid, test = tokshuf.build_nanosets(cfg, num_samples=(1000, 50, 10))
    batch = train.get_batch(range(8))
    print(f"nanosets: {train!r}, {len(valid or [])} valid, {len(test or [])} test samples")
    print(f"  a batch of 8: {batch.shape}")
    # Megatron's rule: whole epochs, as many as the requested samples need.
    check(len(train) >= 1000 and len(valid or []) >= 50 and len(test or []) >= 10, "nanoset sizes")
    check(batch.shape == (8, 129), f"batch shape {batch.shape}")

    shuffled = tokshuf.shuffle(
        corpus, out / "cells", out / "shards", "byte", context_length=SEQLEN, wds_chunk_size=64
    )
    contexts, shards = shuffled["contexts"], shuffled["shards"]
    print(f"shuffle: {contexts} contexts of {SEQLEN} tokens in {shards} shards (open_lm format)")
    # Every document and its end-of-text token, cut into contexts, the last one padded.
    shuffle_tokens = sum(len(t.encode()) + 1 for t in texts)
    check(contexts == -(-shuffle_tokens // SEQLEN), f"{contexts} contexts for {shuffle_tokens} tokens")
    members = 0
    for tar in sorted((out / "shards").glob("shard_*.tar")):
        with tarfile.open(tar) as f:
            for m in f.getmembers():
                data = f.extractfile(m)
                check(data is not None, f"{tar.name}: {m.name} unreadable")
                assert data is not None
                ids = json.loads(gzip.decompress(data.read()))
                check(len(ids) == SEQLEN, f"{m.name}: {len(ids)} ids")
                members += 1
    check(members == contexts, f"{members} contexts in the tars, not {contexts}")
    print(f"  read back: {members} contexts of {SEQLEN} ids")
    print(f"outputs in {out}")
    print("quickstart: all checks passed")


if __name__ == "__main__":
    main()
