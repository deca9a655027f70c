"""Tokenizers from the Rust core: Hugging Face ``tokenizer.json``, tiktoken encodings, bytes.

>>> tok = Tokenizer("tiktoken:cl100k_base")
>>> tok.encode("hello world")
[15339, 1917]

Spec strings (also accepted by :func:`tokshuf.preprocess` and ``tokshuf preprocess --tokenizer``):

==============================  ===============================================================
``byte``                        UTF-8 byte + 1, eod 0, 257 ids (the Megatron fixtures' tokenizer)
``tiktoken:NAME``               an OpenAI encoding shipped inside tokshuf (no download):
                                ``r50k_base`` (alias ``gpt2``), ``p50k_base``, ``p50k_edit``,
                                ``cl100k_base``, ``o200k_base``, ``o200k_harmony``
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
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tokshuf import _core
from tokshuf._core import Tokenizer as _Native
from tokshuf._deprecation import renamed_attribute, renamed_parameters
from tokshuf.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["Tokenizer", "as_tokenizer", "check_local", "tiktoken_encoding"]


def _is_hf_tokenizer(obj: object) -> bool:
    return type(obj).__module__.split(".")[0] == "tokenizers" and hasattr(obj, "to_str")


class Tokenizer:
    """A tokenizer loaded by the Rust core, usable from many threads. Pickles by its spec (or,
    for a ``tokenizers.Tokenizer``, by its JSON).

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
            check_local(name)
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

    @classmethod
    def from_gpt2_bpe(
        cls, vocab_file: str | os.PathLike[str], merge_file: str | os.PathLike[str]
    ) -> Tokenizer:
        """GPT-2's byte-level BPE from its ``vocab.json`` and ``merges.txt`` (Megatron's
        ``--tokenizer-type GPT2BPETokenizer --vocab-file --merge-file``).

        The ids are those of Megatron's ``GPT2Tokenizer``: ``<|endoftext|>`` is the
        end-of-document id, and written in the text it is plain text (no special tokens).
        """
        vocab_path, merge_path = os.fspath(vocab_file), os.fspath(merge_file)
        try:
            with open(vocab_path, encoding="utf-8") as f:
                vocab = json.load(f)
            with open(merge_path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except OSError as e:
            raise ConfigError(f"GPT-2 BPE files: {e.filename}: {e.strerror or e}") from e
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(
                f"GPT-2 vocab file {vocab_path!r} is not a JSON object {{token: id}}: {e}"
            ) from e
        if not isinstance(vocab, dict) or not all(isinstance(v, int) for v in vocab.values()):
            raise ConfigError(f"GPT-2 vocab file {vocab_path!r} must hold a JSON object {{token: id}}")
        # merges.txt: an optional "#version" line, then one "left right" pair per line.
        merges = [line for line in lines if line and not line.startswith("#version")]
        bad = next((m for m in merges if len(m.split(" ")) != 2), None)
        if bad is not None:
            raise ConfigError(f"GPT-2 merges file {merge_path!r}: {bad!r} is not a pair 'left right'")
        byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
        model = {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "vocab": vocab,
            "merges": merges,
        }
        # No added tokens: Megatron's GPT2Tokenizer reads "<|endoftext|>" in text as text.
        hf: dict[str, Any] = {"version": "1.0", "added_tokens": [], "normalizer": None}
        hf.update(pre_tokenizer=byte_level, post_processor=None, decoder=byte_level, model=model)
        tok = cls.__new__(cls)
        tok._load(f"gpt2-bpe:{vocab_path}", json.dumps(hf), vocab.get("<|endoftext|>"))
        return tok

    @property
    def spec(self) -> str:
        """The spec it was loaded from (``"tokenizers.Tokenizer"`` for an object)."""
        return self._spec

    @property
    def eos_token_id(self) -> int | None:
        """The end-of-document id that ``append_eod`` writes, if any."""
        return self._core.eos_token_id

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
        return self._core.encode_batch(_str_list(texts), num_threads)

    def encode_batch_numpy(
        self, texts: Sequence[str], *, num_threads: int | None = None
    ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
        """``(ids, offsets)``: every text's ids concatenated (uint32) and ``len(texts) + 1`` offsets
        (int64), text ``i`` being ``ids[offsets[i]:offsets[i + 1]]``. No Python int per token."""
        ids, offsets = self._core.encode_batch_flat(_str_list(texts), num_threads)
        # Here, so that `tokshuf preprocess` starts without numpy.
        from tokshuf._arrays import as_numpy

        # Views of the arrays the core filled (no copy).
        return as_numpy(ids), as_numpy(offsets)

    def _native(self) -> _Native:
        return self._core

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (self._spec, self._hf_json, self._eod_override, self._special_tokens))

    def __repr__(self) -> str:
        return f"Tokenizer({self._spec!r}, vocab_size={self.vocab_size}, eos_token_id={self.eos_token_id})"


def _str_list(texts: Sequence[str]) -> Sequence[str]:
    """``texts`` as the core takes them: a list or tuple as it is (no copy), anything else listed."""
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of str, not a str")
    return texts if isinstance(texts, list | tuple) else list(texts)


def _restore(
    spec: str, hf_json: str | None, eod_id: int | None, specials: dict[str, int] | None = None
) -> Tokenizer:
    tok = Tokenizer.__new__(Tokenizer)
    tok._load(spec, hf_json, eod_id, specials)
    return tok


_HUB_NAME = re.compile(r"(?:hf:)?([A-Za-z0-9][\w.-]*/[\w.-]+)")


def check_local(spec: str) -> None:
    """Refuse a Hugging Face Hub name (``EleutherAI/gpt-neox-20b``) that is not a local path,
    naming the files to fetch: tokshuf never downloads."""
    match = _HUB_NAME.fullmatch(spec)
    if match is None or os.path.exists(spec.removeprefix("hf:")):
        return
    repo = match.group(1)
    if repo.endswith((".json", ".model", ".tiktoken")):
        return  # a missing file: the loader says so
    local = repo.rsplit("/", 1)[1]
    raise ConfigError(
        f"tokenizer {spec!r} is not a local file or directory, and tokshuf does not download: give a "
        f"local tokenizer.json (no downloads). For the Hugging Face Hub repository {repo!r}, fetch its "
        f"tokenizer.json and tokenizer_config.json (which names the end-of-document token), e.g.\n"
        f"  huggingface-cli download {repo} tokenizer.json tokenizer_config.json --local-dir {local}\n"
        f"or https://huggingface.co/{repo}/resolve/main/tokenizer.json and "
        f"https://huggingface.co/{repo}/resolve/main/tokenizer_config.json, then pass the directory "
        f"{local!r} as the tokenizer"
    )


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
