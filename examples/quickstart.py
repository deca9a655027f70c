"""A small end-to-end run: generate a corpus, preprocess it, read the result back, shuffle it.

Run with ``make example`` (which installs the package first).
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import tokshuf

WORDS = "the of and to in is that for it as with was on be by this are from at or an".split()  # noqa: SIM905


def make_corpus(path: Path, docs: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as f:
        for i in range(docs):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 400)))
            f.write(json.dumps({"id": i, "text": text}) + "\n")


def main() -> None:
    out = Path(tempfile.mkdtemp(prefix="tokshuf-example-"))
    corpus = out / "corpus.jsonl"
    make_corpus(corpus, 2000)
    summary = tokshuf.preprocess(corpus, out / "corpus", "byte", ["text"], append_eod=True, workers=2)
    ds = tokshuf.IndexedDataset(out / "corpus_text_document")
    secs = summary["seconds"]
    print(f"preprocess: {summary['documents']} documents, {ds.num_tokens:,} tokens in {secs:.2f}s")
    print(f"  {ds!r}")
    print(f"  first sequence starts with ids {ds[0][:8].tolist()}")
    cfg = tokshuf.NanosetConfig(ds.prefix, sequence_length=128, path_to_cache=str(out / "cache"))
    train, valid, test = tokshuf.build_nanosets(cfg, num_samples=(1000, 50, 10))
    print(f"nanosets: {train!r}, {len(valid or [])} valid, {len(test or [])} test samples")
    print(f"  a batch of 8: {train.get_batch(range(8)).shape}")
    shuffled = tokshuf.shuffle(corpus, out / "cells", out / "shards", "byte", seqlen=2049, wds_chunk_size=64)
    contexts, shards = shuffled["contexts"], shuffled["shards"]
    print(f"shuffle: {contexts} contexts of 2049 tokens in {shards} shards (open_lm format)")
    print(f"outputs in {out}")


if __name__ == "__main__":
    main()
