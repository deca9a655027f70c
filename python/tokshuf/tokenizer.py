"""Tokenizers from the Rust core: Hugging Face ``tokenizer.json``, tiktoken encodings, bytes.

>>> tok = Tokenizer("tiktoken:cl100k_base")
>>> tok.encode("hello world")
[15339, 1917]

Spec strings (also accepted by :func:`tokshuf.preprocess` and ``tokshuf preprocess --tokenizer``):

==============================  ===============================================================
``byte``                        UTF-8 byte + 1, eod 0, 257 ids (the Megatron fixtures' tokenizer)
``tiktoken:NAME``               an OpenAI encoding shipped inside tokshuf (no download):
                                ``r50k_base`` (alias ``gpt2``), ``p50k_base``, ``p50k_edit``,
                                ``cl100k_base``, ``o200k_base``
``tiktoken:FILE.tiktoken``      a rank file; OpenAI's own files are recognised by their SHA-256
``FILE.tiktoken@PATTERN``       a rank file with the split regex of ``r50k``, ``p50k``,
                                ``cl100k`` or ``o200k`` (``tiktoken:`` prefix optional)
``PATH`` or ``hf:PATH``         a Hugging Face ``tokenizer.json``, or a directory holding one
                                (its ``tokenizer_config.json`` names the eos token)
==============================  ===============================================================

Ids are those of ``tiktoken``'s ``encode_ordinary`` (special tokens in the text are plain text)
and of ``tokenizers``' ``encode(text, add_special_tokens=False)`` (no BOS/EOS added; added tokens
written in the text are recognised), which is what Megatron-LM's ``preprocess_data.py`` writes
with its HuggingFaceTokenizer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tokshuf import _core
from tokshuf._core import Tokenizer as _Native
from tokshuf._deprecation import renamed_attribute, renamed_parameters
from tokshuf.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["Tokenizer", "as_tokenizer", "tiktoken_encoding"]


def _is_hf_tokenizer(obj: object) -> bool:
    return type(obj).__module__.split(".")[0] == "tokenizers" and hasattr(obj, "to_str")


class Tokenizer:
    """A tokenizer loaded by the Rust core, usable from many threads.

    Parameters
    ----------
    spec
        A spec string or path (see the module documentation), a ``tokenizers.Tokenizer`` object,
        or another :class:`Tokenizer`.
    eos_token_id
        Override the end-of-document id (default: ``<|endoftext|>``, ``<|end_of_text|>`` or
        ``</s>``, or the eos token of the Hugging Face tokenizer).
    special_tokens
        Special tokens of a tiktoken rank file, which has none of its own: ``{token: id}``, or the
        path of a JSON file holding that object. Ids must be above the file's ranks. A token
        named ``<|endoftext|>``, ``<|end_of_text|>`` or ``</s>`` becomes the end-of-document id.

    Pickles by its spec (or, for a ``tokenizers.Tokenizer``, by its JSON).
    """

    __slots__ = ("_core", "_eod_override", "_hf_json", "_spec", "_special_tokens")
    _core: _Native
    _spec: str
    _hf_json: str | None
    _eod_override: int | None
    _special_tokens: dict[str, int] | None

    @renamed_parameters(eod_id="eos_token_id")
    def __init__(
        self,
        spec: Any,
        *,
        eos_token_id: int | None = None,
        special_tokens: Mapping[str, int] | str | os.PathLike[str] | None = None,
    ) -> None:
        specials = special_tokens_mapping(special_tokens)
        if isinstance(spec, Tokenizer):
            if eos_token_id is None and specials is None:
                self._spec, self._hf_json, self._eod_override = spec._spec, spec._hf_json, spec._eod_override
                self._special_tokens = spec._special_tokens
                self._core = spec._core
                return
            name, hf_json = spec._spec, spec._hf_json
            specials = specials if specials is not None else spec._special_tokens
        elif _is_hf_tokenizer(spec):
            name, hf_json = "tokenizers.Tokenizer", spec.to_str()
        elif isinstance(spec, str | os.PathLike):
            name, hf_json = os.fspath(spec), None
        else:
            raise TypeError(
                f"cannot make a tokenizer from {type(spec).__name__}: expected a spec string or path, "
                "a tokenizers.Tokenizer or a tokshuf.Tokenizer"
            )
        self._load(name, hf_json, eos_token_id, specials)

    def _load(
        self, name: str, hf_json: str | None, eod_id: int | None, specials: dict[str, int] | None = None
    ) -> None:
        self._spec, self._hf_json, self._eod_override = name, hf_json, eod_id
        self._special_tokens = specials
        if hf_json is None:
            listed = None if specials is None else sorted(specials.items(), key=lambda kv: kv[1])
            self._core = _core.Tokenizer(name, eod_id, listed)
        elif specials is not None:
            raise ConfigError("special tokens can be declared for tiktoken rank files only")
        else:
            self._core = _core.Tokenizer.from_hf_json(hf_json, name, eod_id)

    @property
    def spec(self) -> str:
        """The spec it was loaded from (``"tokenizers.Tokenizer"`` for an object)."""
        return self._spec

    @property
    def eos_token_id(self) -> int | None:
        """The end-of-document id that ``append_eod`` writes, if any."""
        return self._core.eod_id

    eod_id = renamed_attribute[int | None]("eos_token_id")

    @property
    def vocab_size(self) -> int:
        """Number of ids (every id is below it)."""
        return self._core.vocab_size

    @property
    def identity(self) -> dict[str, Any]:
        """What identifies this tokenizer (kind, source, SHA-256 of its data, eod, vocab size)."""
        identity: dict[str, Any] = json.loads(self._core.identity_json())
        return identity

    def encode(self, text: str) -> list[int]:
        """The ids of ``text`` (no special tokens added)."""
        return self._core.encode(text)

    def encode_batch(self, texts: Sequence[str], *, num_threads: int | None = None) -> list[list[int]]:
        """The ids of each text, computed in parallel with the GIL released.

        ``num_threads`` defaults to ``TOKSHUF_NUM_THREADS`` or the number of CPUs.
        """
        return self._core.encode_batch(list(texts), num_threads)

    def encode_batch_numpy(
        self, texts: Sequence[str], *, num_threads: int | None = None
    ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
        """``(ids, offsets)``: every text's ids concatenated (uint32) and ``len(texts) + 1`` offsets
        (int64), text ``i`` being ``ids[offsets[i]:offsets[i + 1]]``. No Python int per token."""
        ids, offsets = self._core.encode_batch_flat(list(texts), num_threads)
        import numpy as np  # here, so that `tokshuf preprocess` starts without numpy

        return np.frombuffer(ids, dtype="<u4"), np.frombuffer(offsets, dtype="<i8")

    def _native(self) -> _Native:
        return self._core

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (self._spec, self._hf_json, self._eod_override, self._special_tokens))

    def __repr__(self) -> str:
        return f"Tokenizer({self._spec!r}, vocab_size={self.vocab_size}, eos_token_id={self.eos_token_id})"


def _restore(
    spec: str, hf_json: str | None, eod_id: int | None, specials: dict[str, int] | None = None
) -> Tokenizer:
    tok = Tokenizer.__new__(Tokenizer)
    tok._load(spec, hf_json, eod_id, specials)
    return tok


def special_tokens_mapping(value: Mapping[str, int] | str | os.PathLike[str] | None) -> dict[str, int] | None:
    """``{token: id}`` from a mapping or a JSON file holding one."""
    if value is None:
        return None
    if isinstance(value, str | os.PathLike):
        path = os.fspath(value)
        try:
            with open(path, encoding="utf-8") as f:
                value = json.load(f)
        except OSError as e:
            raise ConfigError(f"special tokens file {path!r}: {e.strerror or e}") from e
        except json.JSONDecodeError as e:
            raise ConfigError(f"special tokens file {path!r} is not JSON: {e}") from e
        if not isinstance(value, dict):
            raise ConfigError(f"special tokens file {path!r} must hold a JSON object {{token: id}}")
    out: dict[str, int] = {}
    for token, tid in value.items():
        if not isinstance(token, str) or isinstance(tid, bool) or not isinstance(tid, int) or tid < 0:
            raise ConfigError(f"special token {token!r}: expected a string and an id >= 0, got {tid!r}")
        out[token] = tid
    return out


@renamed_parameters(eod_id="eos_token_id")
def as_tokenizer(
    tokenizer: Any,
    eos_token_id: int | None = None,
    special_tokens: Mapping[str, int] | str | os.PathLike[str] | None = None,
) -> Tokenizer:
    """``tokenizer`` (anything :class:`Tokenizer` accepts) as a :class:`Tokenizer`."""
    if isinstance(tokenizer, Tokenizer) and eos_token_id is None and special_tokens is None:
        return tokenizer
    return Tokenizer(tokenizer, eos_token_id=eos_token_id, special_tokens=special_tokens)


def tiktoken_encoding(name: str) -> Any:
    """A ``tiktoken.Encoding`` for OpenAI encoding ``name`` built from tokshuf's embedded copy
    (checked against tiktoken's pinned SHA-256), so ``tiktoken`` works with no download."""
    import base64

    import tiktoken

    data = _core.tiktoken_encoding_data(name)
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in data["tiktoken_file"].splitlines() if line)
    }
    return tiktoken.Encoding(
        name=data["name"],
        pat_str=data["pat_str"],
        mergeable_ranks=ranks,
        special_tokens=dict(data["special_tokens"]),
    )
