"""OLMo-style instance strategies over OLMo token files and Megatron ``.bin/.idx`` datasets.

Map-style datasets with OLMo-core's semantics and batch keys, their index arrays built in Rust
and cached on disk:

* :class:`FSLDataset`: concatenate and chunk, with ``doc_lens`` for intra-document masking;
* :class:`PaddedFSLDataset`: one document per instance, padded;
* :class:`PackedFSLDataset`: documents packed by Optimized Best-Fit Decreasing;
* :class:`InterleavedFSLDataset`: chunks of several documents interleaved;
* :class:`VSLDataset` with :class:`VSLCurriculum`: variable sequence length.

``ds[i]`` is a dict of numpy arrays; ``ds.get_batch(indices)`` fills a whole batch in Rust
without the GIL. :mod:`tokshuf.instances.torch` adapts them to ``torch.utils.data``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokshuf._lazy import lazy_attributes

if TYPE_CHECKING:
    from tokshuf.instances.concat import FSLDataset
    from tokshuf.instances.interleaved import InterleavedFSLDataset
    from tokshuf.instances.packed import PackedFSLDataset
    from tokshuf.instances.padded import PaddedFSLDataset
    from tokshuf.instances.vsl import VSLCurriculum, VSLDataset, VSLEpoch

# Imported on first use, so that the command line reads the datasets' options
# (tokshuf.instances._options) without numpy.
__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "FSLDataset": "tokshuf.instances.concat",
        "InterleavedFSLDataset": "tokshuf.instances.interleaved",
        "PackedFSLDataset": "tokshuf.instances.packed",
        "PaddedFSLDataset": "tokshuf.instances.padded",
        "VSLCurriculum": "tokshuf.instances.vsl",
        "VSLDataset": "tokshuf.instances.vsl",
        "VSLEpoch": "tokshuf.instances.vsl",
    },
)

__all__ = [
    "FSLDataset",
    "InterleavedFSLDataset",
    "PackedFSLDataset",
    "PaddedFSLDataset",
    "VSLCurriculum",
    "VSLDataset",
    "VSLEpoch",
]
