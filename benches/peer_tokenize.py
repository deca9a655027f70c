"""One peer run for bench_preprocess.py and bench_tokenizers.py: tokenize a corpus's texts with HF
`tokenizers`, `tiktoken`, `sentencepiece` or `fastokens` (if installed: ``pip install
fastokens``; never a dependency), the way their users do, and print one JSON line.

    peer_tokenize.py CORPUS --lib hf --tokenizer DIR/tokenizer.json --threads 2 --dtype uint16
    peer_tokenize.py CORPUS --lib tiktoken --tokenizer cl100k_base --threads 1 --dtype int32
    peer_tokenize.py CORPUS --lib tiktoken --tokenizer RANKS.model@PATTERN --eod-id 128001 ...
    peer_tokenize.py CORPUS --lib sentencepiece --tokenizer tokenizer.model --threads 2 ...

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
    if lib == "fastokens":
        return fastokens_encoder(tokenizer, threads)
    if lib == "sentencepiece":
        import sentencepiece

        sp = sentencepiece.SentencePieceProcessor(model_file=tokenizer)

        def sp_batch(texts: list[str]) -> list[list[int]]:
            ids: list[list[int]] = sp.encode(texts, num_threads=threads)
            return ids

        return sp_batch, sp.eos_id()
    import tiktoken
    import tiktoken.load

    from tokshuf import _core
    from tokshuf.tokenizer import tiktoken_encoding  # tiktoken itself, built offline

    if "@" in tokenizer:  # a rank file with a split pattern named as tokshuf names them
        path, pattern = tokenizer.rsplit("@", 1)
        ranks = tiktoken.load.load_tiktoken_bpe(path)
        pat = _core.split_pattern_regex(pattern)
        enc = tiktoken.Encoding("file", pat_str=pat, mergeable_ranks=ranks, special_tokens={})
    else:
        enc = tiktoken_encoding(tokenizer)

    def tiktoken_batch(texts: list[str]) -> list[list[int]]:
        ids: list[list[int]] = enc.encode_ordinary_batch(texts, num_threads=threads)
        return ids

    return tiktoken_batch, enc.eot_token if enc.special_tokens_set else -1


def fastokens_encoder(tokenizer: str, threads: int) -> tuple[Any, int]:
    """fastokens' fastest API (one flat buffer per batch). ``tokenizer``: a ``tokenizer.json`` or
    a tiktoken encoding name (its ``.tiktoken`` file is rebuilt from tokshuf's embedded ranks)."""
    import base64
    import tempfile

    os.environ["FASTOKENS_BPE_THREADS"] = str(threads)  # read at import
    if threads == 1 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])  # its pool ignores the variable
    import fastokens

    if tokenizer.endswith(".json"):
        tok = fastokens.Tokenizer.from_file(tokenizer)
        with open(tokenizer, encoding="utf-8") as fh:
            eod = json.load(fh)["model"]["vocab"]["<|endoftext|>"]
    else:
        from tokshuf._core import BpeEncoder

        enc = BpeEncoder.from_tiktoken(tokenizer)
        ranks = sorted(enc.mergeable_ranks().items(), key=lambda kv: kv[1])
        with tempfile.NamedTemporaryFile(suffix=".tiktoken", delete=False) as f:
            f.write(b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in ranks))
        tok = fastokens.Tokenizer.from_tiktoken(f.name, encoding=tokenizer)
        os.unlink(f.name)
        eod = enc.eod_id

    def fastokens_batch(texts: list[str]) -> list[Any]:
        ids_buf, off_buf = tok.encode_batch_flat(texts, split_special_tokens=True)
        ids, off = np.frombuffer(ids_buf, np.uint32), np.frombuffer(off_buf, np.uint64)
        return [ids[off[i] : off[i + 1]] for i in range(len(texts))]

    return fastokens_batch, eod


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("--lib", choices=["hf", "tiktoken", "sentencepiece", "fastokens"], required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--dtype", default="uint16")
    ap.add_argument("--eod-id", type=int, default=None, help="the id appended to each document")
    args = ap.parse_args()

    texts = load_texts(args.corpus)
    encode_batch, eod = encoder(args.lib, args.tokenizer, args.threads)
    eod = eod if args.eod_id is None else args.eod_id
    digest = hashlib.sha256()
    tokens = 0
    seconds = 0.0
    for i in range(0, len(texts), args.batch):
        batch = texts[i : i + args.batch]
        t0 = time.perf_counter()
        ids = encode_batch(batch)
        seconds += time.perf_counter() - t0
        for doc in ids:
            if len(doc):
                arr = np.append(np.asarray(doc, dtype=args.dtype), np.asarray([eod], dtype=args.dtype))
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
