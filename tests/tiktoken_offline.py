"""``tiktoken.Encoding``s built offline from the rank files tokshuf embeds, using tiktoken's own
constructors (pattern, special tokens, pinned SHA-256) so nothing of ours is trusted but the bytes."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

from tokshuf import _core


def tiktoken_encoding(name: str) -> Any:
    """tiktoken's encoding ``name``; fails if our embedded file's SHA-256 is not tiktoken's pin."""
    import tiktoken
    import tiktoken_ext.openai_public as openai_public
    from tiktoken.load import load_tiktoken_bpe

    data = _core.tiktoken_encoding_data(name)["tiktoken_file"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.tiktoken"
        path.write_bytes(data)

        def load_local(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
            assert expected_hash is not None, f"tiktoken pins no hash for {url}"
            got = hashlib.sha256(data).hexdigest()
            assert got == expected_hash, f"embedded {name} has sha256 {got}, tiktoken pins {expected_hash}"
            # TIKTOKEN_CACHE_DIR="" reads the file directly, with no cache written anywhere.
            with mock.patch.dict(os.environ, {"TIKTOKEN_CACHE_DIR": ""}):
                ranks: dict[bytes, int] = load_tiktoken_bpe(str(path))
            return ranks

        with mock.patch.object(openai_public, "load_tiktoken_bpe", load_local):
            spec = openai_public.ENCODING_CONSTRUCTORS[name]()
    return tiktoken.Encoding(**spec)
