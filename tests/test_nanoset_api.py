"""The Nanoset API: configuration and its errors, YAML, reads, pickling, fork, the GIL, the
repeat scheme."""

from __future__ import annotations

import multiprocessing
import pickle
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from nanoset_helpers import lognormal_lengths, write_dataset

from tokshuf import BlendedNanoset, ConfigError, Nanoset, NanosetConfig, build_nanosets


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[np.ndarray]]:
    prefix = tmp_path_factory.mktemp("corpus") / "c_text_document"
    return prefix, write_dataset(prefix, lognormal_lengths(400, seed=1))


def cfg(prefix: Path | str | dict[str, float] | list[str], **kw: object) -> NanosetConfig:
    kw.setdefault("sequence_length", 32)
    return NanosetConfig(prefix if isinstance(prefix, dict | list) else str(prefix), **kw)  # type: ignore[arg-type]


# -- configuration errors -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sequence_length": 0}, "sequence_length"),
        ({"sequence_length": -5}, "sequence_length"),
        ({"seed": 2**32}, "seed"),
        ({"seed": -1}, "seed"),
        ({"split": "1,2,3,4"}, "1 to 3"),
        ({"split": "0,0,0"}, "zero"),
        ({"split": "90,-10"}, "non-negative"),
        ({"num_samples": (1, 2)}, "train, valid, test"),
        ({"num_samples": (-1, None, None)}, "train sample count"),
        ({"index_scheme": "nanotron"}, "index_scheme"),
        ({"eod_mask_loss": True}, "eos_token_id"),
        ({"mid_level_dataset_surplus": -0.1}, r"surplus must be a number in \[0, 1e6\), got -0.1"),
        ({"mid_level_dataset_surplus": 1e6}, r"surplus must be a number in \[0, 1e6\), got 1000000.0"),
    ],
)
def test_bad_config_values_raise(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        cfg("data/x", **kwargs)


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ({"a": 1.0, "b": -0.5}, "weight 1"),
        ({"a": 0.0, "b": 0.0}, "zero"),
        ({"a": "x"}, "numbers"),
        ({}, "empty"),
    ],
)
def test_bad_weights_raise(weights: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        NanosetConfig(weights, sequence_length=8)  # type: ignore[arg-type]


def test_require_names_a_split(tmp_path: Path) -> None:
    write_dataset(tmp_path / "d", [20] * 10)
    splits = build_nanosets(cfg(tmp_path / "d", split="1,0,0"), num_samples=(4, None, None))
    assert splits.require("train") is splits.train
    with pytest.raises(ConfigError, match="the valid split has no share"):
        splits.require("valid")
    for bad in ("training", "index", "count"):
        with pytest.raises(
            ConfigError, match=rf"split must be one of \['train', 'valid', 'test'\], got '{bad}'"
        ):
            splits.require(bad)  # type: ignore[arg-type]


def test_empty_split_asked_for_samples_raises(tmp_path: Path) -> None:
    # 10 sequences at "949,50,1": test gets [10, 10). Megatron loops forever here (#957).
    write_dataset(tmp_path / "d", [20] * 10)
    with pytest.raises(ConfigError, match="no tokens"):
        build_nanosets(cfg(tmp_path / "d"), num_samples=(10, 2, 5))
    for nothing in (None, 0):  # one pass over nothing, or no samples: an empty dataset
        train, _valid, test = build_nanosets(cfg(tmp_path / "d"), num_samples=(10, 2, nothing))
        assert test is not None
        assert len(test) == 0
    assert train is not None
    assert len(train) >= 10


def test_zero_share_split_is_none(corpus: tuple[Path, list[np.ndarray]]) -> None:
    train, valid, test = build_nanosets(cfg(corpus[0], split="9,1,0"))
    assert isinstance(train, Nanoset)
    assert isinstance(valid, Nanoset)
    assert test is None


def test_weighted_blend_needs_counts(tmp_path: Path) -> None:
    write_dataset(tmp_path / "a", [20] * 30)
    write_dataset(tmp_path / "b", [20] * 30)
    c = cfg({str(tmp_path / "a"): 0.5, str(tmp_path / "b"): 0.5})
    with pytest.raises(ConfigError, match=r"missing: \['valid', 'test'\]"):
        build_nanosets(c, num_samples=(10, None, None))
    c = cfg({str(tmp_path / "a"): 0.5, str(tmp_path / "b"): 0.5}, split="1,0,0")
    (train, valid, test) = build_nanosets(c, num_samples=(10, None, None))
    assert isinstance(train, BlendedNanoset)
    assert valid is None
    assert test is None


def test_oversampled_blend_raises_with_the_numbers(tmp_path: Path) -> None:
    # Greedy blending over sum(ceil(36 * w)) = 38 samples draws 23 from dataset 0, whose one
    # epoch holds exactly ceil(36 * w0) = 22 samples (no surplus).
    weights = [0.6086039727813823, 0.27850488822091257, 0.11289113899770507]
    write_dataset(tmp_path / "a", [22 * 8 + 1])
    write_dataset(tmp_path / "b", [200] * 5)
    write_dataset(tmp_path / "c", [200] * 5)
    paths = [str(tmp_path / n) for n in "abc"]
    c = cfg(
        dict(zip(paths, weights, strict=True)),
        sequence_length=8,
        split="1,0,0",
        mid_level_dataset_surplus=0.0,
    )
    with pytest.raises(ConfigError, match=r"draws 23 samples from dataset 0 .* which has only 22"):
        build_nanosets(c, num_samples=(36, None, None))
    c2 = cfg(dict(zip(paths, weights, strict=True)), sequence_length=8, split="1,0,0")
    train = build_nanosets(c2, num_samples=(36, None, None))[0]
    assert train is not None
    assert np.bincount(train.dataset_index).tolist() == [23, 10, 5]


def test_zero_weight_excludes_a_prefix(tmp_path: Path) -> None:
    write_dataset(tmp_path / "a", [20] * 30)
    c = cfg({str(tmp_path / "a"): 1.0, str(tmp_path / "missing"): 0.0}, split="1,0,0")
    train = build_nanosets(c, num_samples=(50, None, None))[0]
    assert isinstance(train, BlendedNanoset)
    assert train.datasets[1] is None
    assert set(train.dataset_index.tolist()) == {0}


def test_missing_dataset_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        build_nanosets(cfg(tmp_path / "nope"))


# -- YAML -----------------------------------------------------------------------------------
NANOTRON_YAML = """
general: {{project: demo}}
data:
  dataset:
    data_path:
      {a}: 0.8
      {b}: 0.2
    split: 949,50,1
    cache_dir: {cache}
  num_loading_workers: 0
  seed: 42
tokens:
  sequence_length: 64
  train_steps: 10
  micro_batch_size: 2
  batch_accumulation_per_replica: 3
parallelism:
  dp: 4
"""


def test_yaml_in_nanotron_shape(tmp_path: Path) -> None:
    text = NANOTRON_YAML.format(a="data/a", b="data/b", cache=tmp_path / "c")
    c = NanosetConfig.from_yaml(text)
    assert c.data_path == {"data/a": 0.8, "data/b": 0.2}
    assert (c.split, c.seed, c.sequence_length) == ("949,50,1", 42, 64)
    assert c.cache_dir == str(tmp_path / "c")
    assert c.num_samples == (10 * 2 * 3 * 4, None, None)
    f = tmp_path / "cfg.yaml"
    f.write_text(text)
    assert NanosetConfig.from_yaml(f) == c
    assert NanosetConfig.from_yaml(str(f)) == c


# nanotron's examples/config_nanoset.yaml (huggingface/nanotron), its dataset folders replaced by
# .bin/.idx prefixes, validation and test batches asked for, and the blend given a split.
NANOTRON_EXAMPLE = """
checkpoints:
  checkpoint_interval: 1000
  checkpoints_path: checkpoints/
  checkpoints_path_is_shared_file_system: false
  resume_checkpoint_path: null
  save_initial_state: false
data_stages:
- data:
    dataset:
      dataset_folder: {a}
    num_loading_workers: 1
    seed: 42
  name: General purpose training (Single dataset)
  start_training_step: 1
- data:
    dataset:
      dataset_folder:
      - {a}
      - {b}
    num_loading_workers: 1
    seed: 42
  name: Second purpose training (> 1 dataset)
  start_training_step: 15
- data:
    dataset:
      dataset_folder:
        {a}: 0.8
        {b}: 0.2
      tokenizer_name: gpt2
      vocab_size: 50257
      token_size_in_bytes: 2
      return_positions: true
      split: 80,10,10
    num_loading_workers: 1
    seed: 42
  name: Third purpose training (Blended dataset)
  start_training_step: 25
general:
  benchmark_csv_path: null
  consumed_train_samples: null
  ignore_sanity_checks: true
  project: Nanoset
  run: llama
  seed: 42
  step: null
model:
  dtype: bfloat16
  model_config:
    bos_token_id: 1
    eos_token_id: 2
    vocab_size: 50257
parallelism:
  dp: 2
  pp: 1
  tp: 1
tokenizer:
  tokenizer_name_or_path: gpt2
tokens:
  batch_accumulation_per_replica: 3
  limit_test_batches: 1
  limit_val_batches: 2
  micro_batch_size: 2
  sequence_length: 32
  train_steps: 20
  val_check_interval: 5
"""


def test_nanotron_example_config_builds_its_blend(tmp_path: Path) -> None:
    write_dataset(tmp_path / "a", lognormal_lengths(300, seed=4))
    write_dataset(tmp_path / "b", lognormal_lengths(300, seed=5))
    text = NANOTRON_EXAMPLE.format(a=tmp_path / "a", b=tmp_path / "b")
    global_batch = 2 * 3 * 2  # micro batch x accumulation x dp
    one = NanosetConfig.from_yaml(text, stage=0)
    assert one.data_path == str(tmp_path / "a")
    # The whole run needs stages that differ only in their blend; this example's third has a split.
    with pytest.raises(ConfigError, match=r"split='80,10,10'.*share everything but their blend"):
        NanosetConfig.from_yaml(text)
    assert NanosetConfig.from_yaml(text, stage=1).data_path == [str(tmp_path / "a"), str(tmp_path / "b")]
    blend = NanosetConfig.from_yaml(text, stage="Third purpose training (Blended dataset)")
    assert blend.data_path == {str(tmp_path / "a"): 0.8, str(tmp_path / "b"): 0.2}
    assert (blend.seed, blend.sequence_length) == (42, 32)
    # Validation reads the same samples every val_check_interval steps: 2 batches, not 2 per run.
    assert blend.num_samples == (20 * global_batch, 2 * global_batch, 1 * global_batch)
    built = build_nanosets(blend)
    for ds, n in zip(built, blend.num_samples, strict=True):
        assert ds is not None
        assert n is not None
        assert n <= len(ds) < n + 2  # Megatron rounds each dataset's share up
    # Without validation batches (nanotron's default 0), the splits are read whole.
    whole = NanosetConfig.from_yaml(text.replace("limit_val_batches: 2", "limit_val_batches: 0"), stage=0)
    assert whole.num_samples == (20 * global_batch, None, global_batch)


def test_yaml_stages_flat_and_errors(tmp_path: Path) -> None:
    staged = """
data_stages:
  - name: warmup
    data: {dataset: {data_path: [x, y], split: "1,0,0"}, seed: 7}
  - name: main
    data: {dataset: {data_path: z, add_extra_token_to_sequence: false}, seed: 8}
tokens: {sequence_length: 16}
"""
    assert NanosetConfig.from_yaml(staged, stage=0).data_path == ["x", "y"]
    with pytest.raises(ConfigError, match="data stage 0 needs start_training_step"):
        NanosetConfig.from_yaml(staged)
    main = NanosetConfig.from_yaml(staged, stage="main")
    assert (main.data_path, main.seed, main.add_extra_token_to_sequence) == ("z", 8, False)
    with pytest.raises(ConfigError, match="no data stage named"):
        NanosetConfig.from_yaml(staged, stage="nope")
    flat = NanosetConfig.from_yaml("data_path: p\nsequence_length: 8\nnum_samples: [5, null, 1]\n")
    assert flat.num_samples == (5, None, 1)
    with pytest.raises(ConfigError, match="unknown NanosetConfig keys"):
        NanosetConfig.from_yaml("data_path: p\nsequence_length: 8\nsplitt: 1,0,0\n")
    with pytest.raises(ConfigError, match="sequence_length"):
        NanosetConfig.from_yaml("data_path: p\n")
    with pytest.raises(FileNotFoundError):
        NanosetConfig.from_yaml(tmp_path / "none.yaml")


# -- reading ----------------------------------------------------------------------------------
def test_reads_agree(corpus: tuple[Path, list[np.ndarray]]) -> None:
    train = build_nanosets(cfg(corpus[0]), num_samples=(500, None, None))[0]
    assert train is not None
    ks = np.array([0, 7, 3, len(train) - 1, -1, -len(train)])
    batch = train.get_batch(ks)
    assert batch.shape == (len(ks), 33)
    assert batch.dtype == np.int64
    for row, k in zip(batch, ks, strict=True):
        np.testing.assert_array_equal(row, train[int(k)]["input_ids"])
    np.testing.assert_array_equal(train.get_batch(list(range(64)), num_threads=1), train.get_batch(range(64)))
    out = np.full((3, 33), -7, dtype=np.int64)
    assert train.get_batch([5, 6, 7], out=out) is out
    np.testing.assert_array_equal(out, train.get_batch([5, 6, 7]))
    assert train.get_batch([]).shape == (0, 33)


def test_read_errors(corpus: tuple[Path, list[np.ndarray]]) -> None:
    train = build_nanosets(cfg(corpus[0]), num_samples=(100, None, None))[0]
    assert train is not None
    n = len(train)
    with pytest.raises(IndexError):
        train[n]
    with pytest.raises(IndexError):
        train.get_batch([0, n])
    with pytest.raises(IndexError):
        train.get_batch([-n - 1])
    with pytest.raises(TypeError):
        train[1.5]  # type: ignore[index]
    with pytest.raises(TypeError):
        train.get_batch([0.5, 1.0])
    with pytest.raises(ConfigError, match="writable"):
        train.get_batch([0, 1], out=np.zeros((3, 33), np.int64))
    with pytest.raises((ConfigError, TypeError, BufferError)):
        train.get_batch([0, 1], out=np.zeros((2, 33), np.int32))
    ro = np.zeros((2, 33), np.int64)
    ro.flags.writeable = False
    with pytest.raises((ConfigError, BufferError)):
        train.get_batch([0, 1], out=ro)
    assert len(list(train)) == n  # iteration stops at IndexError


def test_arrays_are_read_only_views(corpus: tuple[Path, list[np.ndarray]]) -> None:
    train = build_nanosets(cfg(corpus[0]), num_samples=(100, None, None))[0]
    assert isinstance(train, Nanoset)
    for a in (train.document_index, train.sample_index, train.shuffle_index):
        assert not a.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            a[0] = 1


# -- pickling, fork, GIL ----------------------------------------------------------------------
@pytest.mark.parametrize("cached", [False, True])
def test_pickle_round_trip(corpus: tuple[Path, list[np.ndarray]], tmp_path: Path, cached: bool) -> None:
    c = cfg(corpus[0], cache_dir=str(tmp_path / "cache") if cached else None)
    for ds in build_nanosets(c, num_samples=(300, 20, None)):
        assert ds is not None
        blob = pickle.dumps(ds)
        if cached:  # by path: the arrays stay on disk
            assert len(blob) < 4096
        back = pickle.loads(blob)
        assert len(back) == len(ds)
        np.testing.assert_array_equal(back.shuffle_index, ds.shuffle_index)
        np.testing.assert_array_equal(back.get_batch(range(len(ds))), ds.get_batch(range(len(ds))))


def test_blend_pickles(tmp_path: Path) -> None:
    write_dataset(tmp_path / "a", lognormal_lengths(50, seed=2))
    write_dataset(tmp_path / "b", lognormal_lengths(50, seed=3), dtype="int32")
    c = cfg(
        {str(tmp_path / "a"): 2.0, str(tmp_path / "b"): 1.0}, split="1,0,0", cache_dir=str(tmp_path / "c")
    )
    train = build_nanosets(c, num_samples=(200, None, None))[0]
    assert isinstance(train, BlendedNanoset)
    back = pickle.loads(pickle.dumps(train))
    np.testing.assert_array_equal(back.get_batch(range(200)), train.get_batch(range(200)))


def _child_read(ds: Nanoset, q: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    q.put(ds.get_batch(range(50)).tolist())


def test_reads_after_fork(corpus: tuple[Path, list[np.ndarray]]) -> None:
    train = build_nanosets(cfg(corpus[0]), num_samples=(100, None, None))[0]
    assert train is not None
    want = train.get_batch(range(64)).tolist()  # the parallel pool exists before the fork
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_read, args=(train, q))
    p.start()
    got = q.get(timeout=60)
    p.join(timeout=60)
    assert p.exitcode == 0
    assert got == want[:50]


def test_get_batch_releases_the_gil(tmp_path: Path) -> None:
    write_dataset(tmp_path / "big", [4000] * 300)
    train = build_nanosets(cfg(tmp_path / "big", sequence_length=1024, split="1,0,0"))[0]
    assert train is not None
    ks = np.tile(np.arange(len(train)), 40)
    ticks = 0
    stop = threading.Event()

    def spin() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.01)
        before = ticks
        t0 = time.perf_counter()
        train.get_batch(ks, num_threads=1)
        elapsed = time.perf_counter() - t0
        during = ticks - before
    finally:
        stop.set()
        t.join()
    # Holding the GIL for the whole call would leave the spinning thread at most one switch interval.
    assert elapsed > 0.005
    assert during > 1000, (during, elapsed)


# -- the repeat scheme (seed 000) -------------------------------------------------------------
def test_repeat_scheme_serves_the_same_order_every_epoch(corpus: tuple[Path, list[np.ndarray]]) -> None:
    one = build_nanosets(cfg(corpus[0], split="1,0,0"))[0]
    rep = build_nanosets(
        cfg(corpus[0], split="1,0,0", index_scheme="repeat"), num_samples=(8000, None, None)
    )[0]
    assert isinstance(one, Nanoset)
    assert isinstance(rep, Nanoset)
    m = len(one)
    assert len(rep) == (8000 // m + 1) * m >= 8000
    np.testing.assert_array_equal(rep.document_index, one.document_index)
    np.testing.assert_array_equal(rep.sample_index, one.sample_index)
    for e in range(len(rep) // m):
        np.testing.assert_array_equal(rep.shuffle_index[e * m : (e + 1) * m], one.shuffle_index)
    np.testing.assert_array_equal(rep.get_batch(range(m, m + 10)), one.get_batch(range(10)))
