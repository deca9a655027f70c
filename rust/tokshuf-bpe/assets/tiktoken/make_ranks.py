"""Write the compact rank table of a `.tiktoken` file, as the binary embeds it.

    python3 make_ranks.py PATH/cl100k_base.tiktoken   # writes cl100k_base.ranks here

Format: the number of tokens (u32, little-endian), each token's length in bytes (one byte each),
then the tokens' bytes, all in rank order. The ranks themselves are not stored: they count up
from 0, skipping the encoding's special ids (p50k_base's 50256). A test re-serializes each table
as a `.tiktoken` file and checks it against the SHA-256 that tiktoken pins.
"""

import base64
import struct
import sys
from pathlib import Path


def main(path: str) -> None:
    lines = [line.split() for line in Path(path).read_bytes().splitlines() if line.strip()]
    tokens = [base64.b64decode(token) for token, _ in lines]
    ranks = [int(rank) for _, rank in lines]
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks), "ranks must ascend"
    assert max(map(len, tokens)) < 256, "a token of 256 bytes or more"
    out = Path(__file__).parent / (Path(path).name.removesuffix(".tiktoken") + ".ranks")
    out.write_bytes(struct.pack("<I", len(tokens)) + bytes(map(len, tokens)) + b"".join(tokens))
    print(f"{out}: {len(tokens)} tokens")


if __name__ == "__main__":
    main(sys.argv[1])
