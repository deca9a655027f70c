"""Nanosets: torch-ready map-style datasets over indexed datasets, with Megatron-LM's
GPTDataset / BlendedDataset indices (built natively, cached on disk).

>>> from tokshuf import NanosetConfig, build_nanosets                 # doctest: +SKIP
>>> cfg = NanosetConfig("data/corpus_text_document", sequence_length=2048,
...                     cache_dir="cache", seed=1234)                # doctest: +SKIP
>>> train, valid, test = build_nanosets(cfg, num_samples=(10_000, 600, 50))  # doctest: +SKIP
>>> train[0]["input_ids"].shape, train.get_batch(range(8)).shape     # doctest: +SKIP
((2049,), (8, 2049))
"""

from tokshuf.nanoset.blended import BlendedNanoset
from tokshuf.nanoset.builder import NanosetSplits, build_nanosets
from tokshuf.nanoset.config import NanosetConfig
from tokshuf.nanoset.dataset import Nanoset
from tokshuf.nanoset.sampler import SkipSampler, resume_sampler
from tokshuf.nanoset.staged import StagedNanoset
from tokshuf.nanoset.stages import NanosetStage

__all__ = [
    "BlendedNanoset",
    "Nanoset",
    "NanosetConfig",
    "NanosetSplits",
    "NanosetStage",
    "SkipSampler",
    "StagedNanoset",
    "build_nanosets",
    "resume_sampler",
]
