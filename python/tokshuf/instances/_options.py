"""The keyword options every instance dataset takes, declared once.

:class:`InstanceOptions` names and types them (each dataset's ``**options``), :data:`DEFAULTS`
holds the default of each optional one, and :data:`OPTIONS_DOC` documents them;
:func:`signature_with_options` and :func:`with_defaults` give a dataset's ``__init__`` its whole
signature and its arguments. Kept free of numpy: the command line reads the defaults at start.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, ForwardRef, Literal, Required, TypedDict

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from tokshuf.olmo_tokens import Boundaries

__all__ = [
    "DEFAULTS",
    "LONG_DOC_STRATEGY",
    "MIN_SEQUENCE_LENGTH",
    "OPTIONS_DOC",
    "SOURCE_GROUP_SIZE",
    "InstanceOptions",
    "LongDocStrategy",
    "PathLike",
    "signature_with_options",
    "with_defaults",
]

PathLike = str | os.PathLike[str]
LongDocStrategy = Literal["truncate", "fragment"]


class InstanceOptions(TypedDict, total=False):
    """The keyword options of every instance dataset (documented in :data:`OPTIONS_DOC`)."""

    pad_token_id: Required[int]
    eos_token_id: Required[int]
    bos_token_id: int | None
    vocab_size: int | None
    dtype: DTypeLike | None
    document_boundaries: Boundaries
    label_mask_paths: Sequence[PathLike] | None
    metadata: dict[str, Any] | Sequence[dict[str, Any]] | None
    cache_dir: PathLike | None
    num_threads: int | None


#: The default of every optional key of :class:`InstanceOptions` (the others are required).
DEFAULTS: Final[Mapping[str, Any]] = {
    "bos_token_id": None,
    "vocab_size": None,
    "dtype": None,
    "document_boundaries": "auto",
    "label_mask_paths": None,
    "metadata": None,
    "cache_dir": None,
    "num_threads": None,
}

#: Defaults of the strategies' own options that the command line offers as well.
LONG_DOC_STRATEGY: Final = "truncate"
SOURCE_GROUP_SIZE: Final = 1
MIN_SEQUENCE_LENGTH: Final = 256

OPTIONS_DOC = """\
Options of every instance dataset
---------------------------------
pad_token_id, eos_token_id, bos_token_id
    As in OLMo-core (the first two are required). ``bos_token_id`` switches the EOS scan to
    OLMo's EOS-followed-by-BOS rule.
vocab_size, dtype
    The token dtype of OLMo ``.npy`` token files: given, or the smallest that holds
    ``vocab_size`` ids (one of them is needed for such files; ``.bin/.idx`` prefixes carry theirs).
document_boundaries
    For token files: ``"auto"`` (Dolma metadata if present, else EOS scan), ``"eos"`` or
    ``"metadata"``. ``.bin/.idx`` documents always come from the index. OLMo-core's default is
    the EOS scan; ``"auto"`` warns when the metadata it takes disagrees with one (see
    ``docs/olmo-instances.md``).
label_mask_paths
    One boolean ``.npy`` array per path, aligned with its tokens: ``label_mask`` is False where
    it is (and on padding), as OLMo-core's label masks.
metadata
    A dict for every path, or one dict per path: each item's ``metadata`` (a copy), as in
    OLMo-core; ``{}`` means none (no ``metadata`` key).
cache_dir
    Root of the caches; the index arrays go to ``<cache_dir>/instances/`` (default:
    ``$TOKSHUF_CACHE_DIR``, else ``$XDG_CACHE_HOME/tokshuf``, else ``~/.cache/tokshuf``).
num_threads
    Threads for scans and batch reads (default: ``$TOKSHUF_NUM_THREADS`` or all CPUs).
"""


def with_defaults(options: Mapping[str, Any], owner: str) -> dict[str, Any]:
    """``options`` with :data:`DEFAULTS` for what they leave out; a missing required option or an
    unknown one is a ``TypeError`` naming ``owner``, as for any keyword argument."""
    known = InstanceOptions.__annotations__
    unknown = [k for k in options if k not in known]
    if unknown:
        raise TypeError(f"{owner}() got an unexpected keyword argument {unknown[0]!r}")
    missing = [k for k in known if k not in options and k not in DEFAULTS]
    if missing:
        listed = " and ".join(repr(k) for k in missing)
        raise TypeError(f"{owner}() missing required keyword argument{'s' * (len(missing) > 1)}: {listed}")
    return {k: options.get(k, DEFAULTS.get(k)) for k in known}


def _written(annotation: Any) -> str:
    """An option's annotation as written (annotations are not evaluated here: numpy's types are
    not imported), without the ``Required[...]`` that its missing default says."""
    text = annotation.__forward_arg__ if isinstance(annotation, ForwardRef) else str(annotation)
    return text.removeprefix("Required[").removesuffix("]") if text.startswith("Required[") else text


def signature_with_options(init: Callable[..., Any]) -> inspect.Signature:
    """The signature of a dataset's ``__init__`` with its ``**options`` spelled out (for
    ``help()`` and ``inspect``): its own required keywords, the required options, its own
    optional keywords, then the optional options, with their defaults."""
    signature = inspect.signature(init)
    own = list(signature.parameters.values())
    shared = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=DEFAULTS.get(name, inspect.Parameter.empty),
            annotation=_written(annotation),
        )
        for name, annotation in InstanceOptions.__annotations__.items()
    ]
    positional = [p for p in own if p.kind not in (p.KEYWORD_ONLY, p.VAR_KEYWORD)]
    keywords = [p for p in own if p.kind == p.KEYWORD_ONLY]

    def required(p: inspect.Parameter) -> bool:
        return p.default is p.empty

    ordered = [p for p in keywords if required(p)] + [p for p in shared if required(p)]
    ordered += [p for p in keywords if not required(p)] + [p for p in shared if not required(p)]
    return signature.replace(parameters=positional + ordered)
