"""A pure-Python model of nanotron's staged runs (nanotron's ``data_stages``, TokenizedBytes and
BlendableDataset at huggingface/nanotron 2411b022), to test tokshuf's staged Nanosets against where
nanotron itself cannot run. Written from the rules in ../shared/specs/nanotron-spec.md and
nanotron's run_train.py / trainer.py / blendable_dataset.py, in our own code:

* each stage starts at its ``start_training_step`` (steps count from 1) with its own
  ``consumed_train_samples`` at 0, and owns the steps up to the next stage's start;
* its BlendableDataset blends its folders by its normalized weights (a list without weights:
  equal weights), Megatron's greedy rule, sample indices counted per folder from 0;
* its sampler (MegatronPretrainingSampler) reads blend indices from the stage's consumed samples:
  step ``s`` of a stage that started at ``start`` reads ``[(s - start) B, (s - start + 1) B)``;
* a folder's draw ``t`` reads its sample ``t + offsets_in_samples[folder]``, the tokens counted for
  that folder in the earlier stages divided by the sequence length;
* nanotron counts a stage's tokens per folder over blend positions ``[(s - 1) B, s B)`` of the
  step ``s`` it trains (``update_consumption_metrics``, "assumes we start from iteration_step=1"):
  the positions it served only for the stage that starts at step 1. ``count="served"`` counts the
  positions the stage served instead (what tokshuf does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

Stage = tuple[int, Mapping[str, float] | Sequence[str]]  # (start_training_step, folders/weights)


def greedy_blend(weights: Sequence[float], size: int) -> tuple[list[int], list[int]]:
    """Megatron's ``build_blending_indices``: float64 normalized weights; sample ``s`` goes to the
    first dataset with the largest ``w * max(s, 1) - drawn``."""
    w = np.asarray(weights, dtype=np.float64)
    w = w / np.sum(w)
    counts = np.zeros(len(w), dtype=np.float64)
    di, dsi = [], []
    for s in range(size):
        d = int(np.argmax(w * max(float(s), 1.0) - counts))
        di.append(d)
        dsi.append(int(counts[d]))
        counts[d] += 1
    return di, dsi


def staged_run(
    stages: Sequence[Stage], train_steps: int, global_batch: int, seq_len: int, count: str = "nanotron"
) -> list[list[tuple[str, int]]]:
    """Per global step (from 1), the ``(folder, sample of the folder)`` each of its samples reads."""
    stages = sorted(stages, key=lambda s: s[0])
    consumed: list[dict[str, int]] = []  # tokens per folder, per finished stage
    steps: list[list[tuple[str, int]]] = []
    size = train_steps * global_batch  # nanotron builds every stage's blend for the whole run
    for k, (start, spec) in enumerate(stages):
        folders = list(spec)
        weights = [float(spec[f]) for f in folders] if isinstance(spec, Mapping) else [1.0] * len(folders)
        earlier: dict[str, int] = {}
        for c in consumed:
            for f, t in c.items():
                earlier[f] = earlier.get(f, 0) + t
        offsets = {f: earlier.get(f, 0) // seq_len for f in folders}
        di, dsi = greedy_blend(weights, size)
        end = stages[k + 1][0] - 1 if k + 1 < len(stages) else train_steps
        tokens = dict.fromkeys(folders, 0)
        for s in range(start, end + 1):
            local = range((s - start) * global_batch, (s - start + 1) * global_batch)
            steps.append([(folders[di[i]], dsi[i] + offsets[folders[di[i]]]) for i in local])
            counted = local if count == "served" else range((s - 1) * global_batch, s * global_batch)
            for i in counted:
                tokens[folders[di[i]]] += seq_len
        consumed.append(tokens)
    return steps
