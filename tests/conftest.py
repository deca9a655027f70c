"""Shared test helpers: fixture paths, hypothesis profiles, small corpus writers."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# A runner started in the background (`cmd &` in a script) ignores SIGINT, and every child it
# starts would too: the Ctrl-C tests need the disposition a terminal gives. (A handler, unlike
# SIG_IGN, is not inherited across exec, so children start with the default.)
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

FIXTURES = Path(__file__).parent / "fixtures"
MEGATRON = FIXTURES / "megatron"

settings.register_profile(
    "fast", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "slow", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))


@pytest.fixture(scope="session", autouse=True)
def _cache_root(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The caches a test builds without a cache_dir (Nanosets, instances, remote copies) go to a
    temporary root, never to the user's."""
    saved = os.environ.get("TOKSHUF_CACHE_DIR")
    os.environ["TOKSHUF_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache-root"))
    yield
    if saved is None:
        os.environ.pop("TOKSHUF_CACHE_DIR", None)
    else:
        os.environ["TOKSHUF_CACHE_DIR"] = saved


@pytest.fixture(scope="session")
def megatron_manifest() -> dict[str, Any]:
    return json.loads((MEGATRON / "manifest.json").read_text())


def write_jsonl(path: Path, records: Iterable[Any], compress: str | None = None) -> Path:
    """Write one JSON value per line; ``compress`` is None, "gz" or "zst"."""
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress == "gz":
        path.write_bytes(gzip.compress(data, mtime=0))
    elif compress == "zst":
        import zstandard

        path.write_bytes(zstandard.ZstdCompressor().compress(data))
    else:
        path.write_bytes(data)
    return path


def release(procs: list[subprocess.Popen[str]], go: Path) -> list[Any]:
    """Let processes that wait for the file ``go`` start at once; the JSON each prints (each
    must succeed)."""
    time.sleep(1.0)  # let them all import and wait at the starting line
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    return results


@pytest.fixture(scope="session")
def make_corpus(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``make_corpus(name, *args)`` → (path, manifest), generated once per session."""
    from corpus import CorpusFactory

    return CorpusFactory(tmp_path_factory.mktemp("corpora"))


@pytest.fixture(scope="session")
def s3() -> Any:
    """A real S3-compatible server on 127.0.0.1 (moto), behind a fault-injecting proxy, with this
    process's environment pointing tokshuf at it for the session."""
    from s3_helpers import S3Server

    server = S3Server()
    saved = {k: os.environ.get(k) for k in server.env()}
    os.environ.update(server.env())
    yield server
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    server.stop()
