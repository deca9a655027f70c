"""One peer run for bench_preprocess.py: tokenize a corpus's texts with HF `tokenizers` or
`tiktoken`, the way their users do, and print one JSON line.

    peer_tokenize.py CORPUS --lib hf --tokenizer DIR/tokenizer.json --threads 2 --dtype uint16
    peer_tokenize.py CORPUS --lib tiktoken --tokenizer cl100k_base --threads 1 --dtype int32

The texts are loaded first (not timed); only the encode calls are timed, in batches of
``--batch`` documents. The ids are also hashed (outside the timed region) exactly as a Megatron
``.bin`` with ``--append-eod`` would hold them, so the driver can check they equal tokshuf's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from typing import Any

import numpy as np


def load_texts(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def encoder(lib: str, tokenizer: str, threads: int) -> tuple[Any, int]:
    """(batch encode function, eod id)."""
    if lib == "hf":
        # Set before the first parallel call: tokenizers reads them once.
        os.environ["TOKENIZERS_PARALLELISM"] = "true" if threads > 1 else "false"
        os.environ["RAYON_NUM_THREADS"] = str(threads)
        import tokenizers

        tok = tokenizers.Tokenizer.from_file(tokenizer)
        eod = tok.token_to_id("<|endoftext|>")

        def hf_batch(texts: list[str]) -> list[list[int]]:
            return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]

        return hf_batch, eod
    from tokshuf.tokenizer import tiktoken_encoding  # tiktoken itself, built offline

    enc = tiktoken_encoding(tokenizer)

    def tiktoken_batch(texts: list[str]) -> list[list[int]]:
        ids: list[list[int]] = enc.encode_ordinary_batch(texts, num_threads=threads)
        return ids

    return tiktoken_batch, enc.eot_token


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("--lib", choices=["hf", "tiktoken"], required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--dtype", default="uint16")
    args = ap.parse_args()

    texts = load_texts(args.corpus)
    encode_batch, eod = encoder(args.lib, args.tokenizer, args.threads)
    digest = hashlib.sha256()
    tokens = 0
    seconds = 0.0
    for i in range(0, len(texts), args.batch):
        batch = texts[i : i + args.batch]
        t0 = time.perf_counter()
        ids = encode_batch(batch)
        seconds += time.perf_counter() - t0
        for doc in ids:
            if doc:
                arr = np.asarray([*doc, eod], dtype=args.dtype)
                digest.update(arr.tobytes())
                tokens += len(doc)
    text_bytes = sum(len(t.encode("utf-8")) for t in texts)
    json.dump(
        {"seconds": seconds, "tokens": tokens, "text_bytes": text_bytes, "ids_sha256": digest.hexdigest()},
        sys.stdout,
    )
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
