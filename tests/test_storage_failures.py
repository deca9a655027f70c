"""A failing store fails the run, within the retry budget, naming the object, the request and the
real cause; it is never taken for bad data, whatever ``--on-error`` says. Uploads are retried like
reads and aborted when they fail. Bucket roots are prefixes; a key the client cannot name is
passed over. No credential reaches any message, log, summary or file.

The S3 tests run against moto behind the fault proxy of ``s3_helpers``; the http(s) ones against
small servers on 127.0.0.1 that misbehave in one way each.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import write_jsonl

import tokshuf
from tokshuf import _core

BUDGET = "2"


@pytest.fixture
def budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKSHUF_STORAGE_RETRY_SECONDS", BUDGET)


def docs(tag: str, n: int) -> list[dict[str, str]]:
    return [{"text": f"{tag} {i} " + "token " * (i % 17)} for i in range(n)]


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tokshuf", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextmanager
def serve(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` on 127.0.0.1; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


# -- a failing store is never bad data --------------------------------------------------------------
@pytest.mark.parametrize("name", ["b.jsonl.zst", "b.jsonl.gz", "b.jsonl"])
def test_an_outage_under_skip_fails_the_run_naming_the_object(
    s3: Any, tmp_path: Path, budget: None, name: str
) -> None:
    bucket = s3.bucket(f"outage-{name.replace('.', '-')}")
    for n, compress in (
        ("a.jsonl", None),
        (name, name.rsplit(".", 1)[-1] if "gz" in name or "zst" in name else None),
    ):
        local = write_jsonl(tmp_path / n, docs(n, 300), compress=compress)
        s3.put(bucket, f"in/{n}", local.read_bytes())
    url = f"s3://{bucket}/in/{name}"
    with (
        s3.faults(rate=1.0, kinds=("500",), only=name, method="GET"),
        pytest.raises(OSError, match=re.escape("GET bytes 0-")) as caught,
    ):
        tokshuf.preprocess(f"s3://{bucket}/in/", f"s3://{bucket}/out/ds", "byte", on_error="skip")
    message = str(caught.value)
    assert url in message, message
    assert "500 Internal Server Error (InternalError: injected)" in message, message
    assert "truncated_file" not in message
    assert s3.keys(bucket, "out/") == []


def test_a_shuffle_under_skip_fails_on_an_outage_too(s3: Any, tmp_path: Path, budget: None) -> None:
    bucket = s3.bucket("outage-shuffle")
    for n in ("p.jsonl", "q.jsonl"):
        s3.put(bucket, f"in/{n}", write_jsonl(tmp_path / n, docs(n, 200)).read_bytes())
    cells, out = tmp_path / "cells", tmp_path / "out"
    with (
        s3.faults(rate=1.0, kinds=("503",), only="q.jsonl", method="GET"),
        pytest.raises(OSError, match=re.escape(f"s3://{bucket}/in/q.jsonl")),
    ):
        tokshuf.shuffle(f"s3://{bucket}/in/", cells, out, "byte", context_length=65, on_error="skip")


def test_an_object_changed_mid_read_fails_under_skip(s3: Any, tmp_path: Path, budget: None) -> None:
    bucket = s3.bucket("changed")
    s3.put(bucket, "in/x.jsonl", write_jsonl(tmp_path / "x.jsonl", docs("x", 50)).read_bytes())
    with (
        s3.faults(rate=1.0, kinds=("412",), method="GET"),
        pytest.raises(OSError, match="changed while it was read"),
    ):
        tokshuf.preprocess(f"s3://{bucket}/in/x.jsonl", tmp_path / "o", "byte", on_error="skip")


class _NoRange(http.server.SimpleHTTPRequestHandler):
    """A static server that ignores Range (as ``python -m http.server`` does)."""

    def log_message(self, *args: Any) -> None:
        pass


def test_a_server_ignoring_range_fails_under_skip(s3: Any, tmp_path: Path, budget: None) -> None:
    www = tmp_path / "www"
    write_jsonl(www / "d.jsonl.gz", docs("d", 40), compress="gz")
    handler = type("Handler", (_NoRange,), {"__init__": _directory_init(www)})
    with serve(handler) as base, pytest.raises(OSError, match="Range request not supported"):
        tokshuf.preprocess(f"{base}/d.jsonl.gz", tmp_path / "o", "byte", on_error="skip")
    # An S3-compatible server (here a proxy) that drops the Range header.
    bucket = s3.bucket("norange")
    s3.put(bucket, "d.jsonl.gz", (www / "d.jsonl.gz").read_bytes())
    with (
        s3.faults(rate=1.0, kinds=("norange",), method="GET"),
        pytest.raises(OSError, match=rf"GET bytes 0-\d+ of s3://{bucket}/d\.jsonl\.gz failed: .*non-partial"),
    ):
        tokshuf.preprocess(f"s3://{bucket}/d.jsonl.gz", tmp_path / "o", "byte", on_error="skip")


def _directory_init(root: Path) -> Any:
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        http.server.SimpleHTTPRequestHandler.__init__(self, *args, directory=str(root), **kwargs)

    return init


class _Broken(http.server.BaseHTTPRequestHandler):
    """``/busy/...`` answers 503, ``/loop/...`` redirects to itself, anything else 404; PROPFIND
    (the listing of an http(s) prefix) answers 405, as a plain web server does."""

    def do_HEAD(self) -> None:
        if self.path.startswith("/busy/"):
            self.send_response(503)
        elif self.path.startswith("/loop/"):
            self.send_response(302)
            self.send_header("Location", self.path)
        else:
            self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD

    def do_PROPFIND(self) -> None:
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_an_objects_own_failure_is_reported_not_the_listing_fallback(tmp_path: Path, budget: None) -> None:
    with serve(_Broken) as base:
        for path, cause in (("busy/a.jsonl", "503 Service Unavailable"), ("loop/a.jsonl", "redirect")):
            with pytest.raises(OSError, match=re.escape(f"HEAD of {base}/{path} failed")) as caught:
                tokshuf.preprocess(f"{base}/{path}", tmp_path / "o", "byte")
            message = str(caught.value)
            assert cause in message, message
            assert "PROPFIND" not in message
        # Only a missing object is looked for as a prefix.
        with pytest.raises(OSError, match=r"PROPFIND|LIST"):
            tokshuf.preprocess(f"{base}/gone/a.jsonl", tmp_path / "o", "byte")


# -- the retry budget bounds the whole wait -----------------------------------------------------------
@contextmanager
def silent_server() -> Iterator[int]:
    """A server that accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        for c in held:
            c.close()
        sock.close()


def test_a_silent_store_fails_within_the_budget_naming_the_request(tmp_path: Path) -> None:
    with silent_server() as port:
        env = {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "k",
            "AWS_SECRET_ACCESS_KEY": "s",
            "AWS_REGION": "us-east-1",
            "TOKSHUF_STORAGE_RETRY_SECONDS": BUDGET,
        }
        started = time.monotonic()
        run = cli(
            "preprocess",
            "--input",
            "s3://quiet/in.jsonl",
            "--output-prefix",
            str(tmp_path / "o"),
            "--tokenizer",
            "byte",
            "--quiet",
            env=env,
        )
        took = time.monotonic() - started
    assert run.returncode == 1, run.stderr
    assert "HEAD of s3://quiet/in.jsonl failed: the store did not answer" in run.stderr, run.stderr
    assert took < 20, f"a {BUDGET} s budget took {took:.0f} s"


def test_a_read_that_stalls_fails_within_the_budget(s3: Any, tmp_path: Path, budget: None) -> None:
    bucket = s3.bucket("stalls")
    s3.put(bucket, "in/h.jsonl", write_jsonl(tmp_path / "h.jsonl", docs("h", 30)).read_bytes())
    started = time.monotonic()
    with (
        s3.faults(rate=1.0, kinds=("hang",), method="GET"),
        pytest.raises(TimeoutError, match=re.escape("GET bytes 0-")) as caught,
    ):
        tokshuf.preprocess(f"s3://{bucket}/in/h.jsonl", tmp_path / "o", "byte", on_error="skip")
    assert time.monotonic() - started < 20
    assert f"s3://{bucket}/in/h.jsonl" in str(caught.value)


# -- uploads are retried like reads, and aborted when they fail -------------------------------------
def _big_file(path: Path) -> bytes:
    """17 MiB and a bit: a multipart upload of two parts."""
    data = os.urandom(1 << 16) * 272 + b"tail"
    path.write_bytes(data)
    return data


@pytest.mark.parametrize(
    ("request_name", "fault"),
    [
        ("create", {"kinds": ("cut",), "method": "POST", "only": "?uploads"}),
        ("complete", {"kinds": ("cut",), "method": "POST", "only": "uploadId="}),
        ("part", {"kinds": ("drop", "503"), "method": "PUT", "only": "partNumber=2"}),
    ],
)
def test_a_cut_upload_answer_is_retried(
    s3: Any, tmp_path: Path, budget: None, request_name: str, fault: dict[str, Any]
) -> None:
    bucket = s3.bucket(f"up-{request_name}")
    data = _big_file(tmp_path / "big.bin")
    with s3.faults(rate=1.0, limit=1, **fault) as injected:
        _core.upload(tmp_path / "big.bin", f"s3://{bucket}/o/big.bin")
    assert injected.injected == 1
    assert s3.get(bucket, "o/big.bin") == data


def test_a_small_put_whose_answer_is_lost_is_retried(s3: Any, tmp_path: Path, budget: None) -> None:
    bucket = s3.bucket("up-small")
    (tmp_path / "s.json").write_text('{"x": 1}')
    with s3.faults(rate=1.0, limit=1, kinds=("drop",), method="PUT") as injected:
        _core.upload(tmp_path / "s.json", f"s3://{bucket}/s.json")
    assert injected.injected == 1
    assert s3.get(bucket, "s.json") == b'{"x": 1}'


def test_a_failed_upload_is_aborted(s3: Any, tmp_path: Path, budget: None) -> None:
    bucket = s3.bucket("up-aborted")
    _big_file(tmp_path / "big.bin")
    with (
        s3.faults(rate=1.0, kinds=("500",), method="PUT", only="partNumber=2"),
        pytest.raises(OSError, match=re.escape(f"upload part 2 of s3://{bucket}/o/big.bin failed")),
    ):
        _core.upload(tmp_path / "big.bin", f"s3://{bucket}/o/big.bin")
    assert s3.uploads(bucket) == []
    assert s3.keys(bucket) == []


@pytest.mark.parametrize(("kind", "said"), [("403", "403"), ("denykeys", "AccessDenied")])
def test_a_rewrite_that_may_not_delete_the_old_index_fails_naming_it(
    s3: Any, tmp_path: Path, kind: str, said: str
) -> None:
    """Before uploading, a rewrite deletes the old index (Megatron, which reads no commit record,
    would pair it with the new data). A store that refuses the deletion, with an error status or
    as AWS refuses one key of a multi-object delete (200, and an error for the key), fails the
    run, naming the object; a first write, with nothing to delete, asks for no deletion at all."""
    bucket = s3.bucket(f"no-delete-{kind}")
    src = write_jsonl(tmp_path / "a.jsonl", docs("a", 20))
    url = f"s3://{bucket}/ds"
    # object_store deletes with S3's multi-object request, `POST /bucket?delete`.
    with s3.faults(rate=1.0, kinds=(kind,), only="?delete") as refused:
        tokshuf.preprocess(src, url, "byte", append_eod=True)
        assert refused.seen == 0
        with pytest.raises(OSError, match=rf"s3://{bucket}/ds_text_document\.idx.*{said}") as caught:
            tokshuf.preprocess(src, url, "byte", append_eod=True)
    assert refused.injected == 1, caught.value  # a refusal is not retried
    assert "ds_text_document.idx" in s3.keys(bucket)  # nothing was deleted or uploaded
    # The record was retracted first: the old set, intact, is refused until a rerun completes.
    assert json.loads(s3.get(bucket, "ds.commit.json"))["state"] == "writing"


# -- what a URL names ---------------------------------------------------------------------------------
def test_a_bucket_root_is_a_prefix(s3: Any, tmp_path: Path) -> None:
    bucket = s3.bucket("whole")
    s3.put(bucket, "x.jsonl", write_jsonl(tmp_path / "x.jsonl", docs("x", 7)).read_bytes())
    s3.put(
        bucket, "deep/er/y.jsonl.gz", write_jsonl(tmp_path / "y.gz", docs("y", 5), compress="gz").read_bytes()
    )
    s3.put(bucket, ".hidden.jsonl", b'{"text": "no"}\n')
    for url in (f"s3://{bucket}", f"s3://{bucket}/"):
        summary = tokshuf.preprocess(url, tmp_path / "o", "byte")
        assert summary["inputs"] == [f"s3://{bucket}/deep/er/y.jsonl.gz", f"s3://{bucket}/x.jsonl"], url
        assert summary["documents"] == 12
        assert summary["scan_skipped"] == {"hidden": 1}


def test_keys_the_client_cannot_name_are_passed_over(s3: Any, tmp_path: Path) -> None:
    bucket = s3.bucket("oddkeys")
    names = ["a.jsonl", "b\x01c.jsonl", "d.jsonl", "e\x7f.jsonl", "z/f.jsonl"]
    for name in names:
        s3.put(bucket, f"ctl/{name}", write_jsonl(tmp_path / "t.jsonl", docs(name, 3)).read_bytes())
    summary = tokshuf.preprocess(f"s3://{bucket}/ctl/", tmp_path / "o", "byte")
    assert summary["inputs"] == [f"s3://{bucket}/ctl/{n}" for n in ("a.jsonl", "d.jsonl", "z/f.jsonl")]
    assert summary["scan_skipped"] == {"invalid_key": 2}
    skipped = [(s["path"], s["reason"]) for s in summary["first_scan_skipped"]]
    assert skipped == [
        (f"s3://{bucket}/ctl/b\\u{{1}}c.jsonl", "invalid_key"),
        (f"s3://{bucket}/ctl/e\\u{{7f}}.jsonl", "invalid_key"),
    ]
    globbed = tokshuf.preprocess(f"s3://{bucket}/ctl/*.jsonl", tmp_path / "g", "byte")
    assert len(globbed["inputs"]) == 2
    assert globbed["scan_skipped"] == {"invalid_key": 2}


def test_an_object_with_glob_characters_is_read_as_itself(s3: Any, tmp_path: Path) -> None:
    bucket = s3.bucket("literal")
    s3.put(bucket, "lit/a[1].jsonl", write_jsonl(tmp_path / "l.jsonl", docs("bracket", 4)).read_bytes())
    s3.put(bucket, "lit/a1.jsonl", write_jsonl(tmp_path / "m.jsonl", docs("plain", 9)).read_bytes())
    summary = tokshuf.preprocess(f"s3://{bucket}/lit/a[1].jsonl", tmp_path / "o", "byte")
    assert summary["inputs"] == [f"s3://{bucket}/lit/a[1].jsonl"]
    assert summary["documents"] == 4


# -- task flags ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["preprocess", "--shard", "4/4"], "--shard"),
        (["preprocess", "--shard", "-2/5"], "--shard"),
        (["preprocess", "--shard", "two"], "--shard"),
        (["shuffle", "--stage", "cells", "--task", "3/3"], "--task"),
    ],
)
def test_a_bad_task_is_a_usage_error_naming_the_flag(tmp_path: Path, args: list[str], flag: str) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", docs("t", 3))
    rest = ["--input", str(src), "--tokenizer", "byte"]
    rest += (
        ["--output-prefix", str(tmp_path / "o")]
        if args[0] == "preprocess"
        else ["--local-cell-dir", str(tmp_path / "c"), "--output", str(tmp_path / "s")]
    )
    run = cli(*args, *rest)
    assert run.returncode == 2, run.stderr
    assert f"argument {flag}" in run.stderr, run.stderr
    assert "expected one argument" not in run.stderr


def test_shard_auto_numbers_slurm_array_tasks_by_step(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", docs("s", 20))
    # sbatch --array=3-12:3 → ids 3, 6, 9, 12: id 9 is task 2 of 4.
    slurm = {
        "SLURM_ARRAY_TASK_ID": "9",
        "SLURM_ARRAY_TASK_MIN": "3",
        "SLURM_ARRAY_TASK_MAX": "12",
        "SLURM_ARRAY_TASK_STEP": "3",
        "SLURM_ARRAY_TASK_COUNT": "4",
    }
    run = cli(
        "preprocess",
        "--input",
        str(src),
        "--output-prefix",
        str(tmp_path / "o"),
        "--tokenizer",
        "byte",
        "--shard",
        "auto",
        "--quiet",
        env=slurm,
    )
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "o-part-00002-of-00004_summary.json").exists()
    # A list of ids that is no range cannot be numbered.
    bad = {**slurm, "SLURM_ARRAY_TASK_MAX": "20"}
    run = cli(
        "preprocess",
        "--input",
        str(src),
        "--output-prefix",
        str(tmp_path / "o"),
        "--tokenizer",
        "byte",
        "--shard",
        "auto",
        env=bad,
    )
    assert run.returncode == 2, run.stderr
    assert "argument --shard" in run.stderr


# -- no secret in any output --------------------------------------------------------------------------
#: Every credential variable of the stores, set to a marker.
SECRETS = {
    "AWS_ACCESS_KEY_ID": "AKIAMARKERKEYID7Q3Z",
    "AWS_SECRET_ACCESS_KEY": "marker-aws-secret-5c1e9b",
    "AWS_SESSION_TOKEN": "marker-aws-session-token-77ad20",
    "AWS_SECURITY_TOKEN": "marker-aws-security-token-0b3f",
    "GOOGLE_SERVICE_ACCOUNT_KEY": "marker-google-account-key-4e2a",
    "GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent/marker-google-credentials-9d.json",
    "AZURE_STORAGE_ACCOUNT_KEY": "marker-azure-account-key-61fc",
    "AZURE_STORAGE_SAS_TOKEN": "marker-azure-sas-token-2b8e",
    "AZURE_STORAGE_TOKEN": "marker-azure-bearer-token-a0d1",
    "AZURE_CLIENT_SECRET": "marker-azure-client-secret-5e7c",
}
#: Secrets a URL carries: a password, and a signed URL's signature, credential and token.
URL_SECRETS = (
    "marker-url-password-3f9a",
    "marker-signature-8d0c",
    "marker-credential-41b7",
    "marker-token-c2e6",
)


class _Echo(http.server.BaseHTTPRequestHandler):
    """``/ok/NAME``: the file NAME of ``files`` (ranges, a strong ETag); anything else: an error
    whose body echoes the request line and every header (as AWS's SignatureDoesNotMatch echoes
    the canonical request): 403 for S3 requests, 500 for ``/e500/``, else 404."""

    files: ClassVar[dict[str, bytes]] = {}
    protocol_version = "HTTP/1.1"

    def _answer(self, body: bool) -> None:
        name = self.path.split("?")[0].removeprefix("/ok/")
        if self.path.startswith("/ok/") and name in self.files:
            data = self.files[name]
            start, end = 0, len(data)
            ranged = self.headers.get("Range")
            if ranged:
                a, b = ranged.removeprefix("bytes=").split("-")
                start, end = int(a), min(int(b) + 1, len(data))
            self.send_response(206 if ranged else 200)
            self.send_header("Content-Length", str(end - start))
            self.send_header("ETag", '"v1"')
            if ranged:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
            self.end_headers()
            if body:
                self.wfile.write(data[start:end])
            return
        echo = "\n".join(f"{k.lower()}:{v}" for k, v in self.headers.items())
        payload = (
            "<?xml version='1.0' encoding='UTF-8'?><Error><Code>SignatureDoesNotMatch</Code><Message>The "
            f"signature does not match</Message><CanonicalRequest>{self.command} {self.path}\n{echo}"
            "</CanonicalRequest></Error>"
        ).encode()
        status = 500 if self.path.startswith("/e500/") else 403 if "authorization" in echo else 404
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    do_PROPFIND = do_GET

    def log_message(self, *args: Any) -> None:
        pass


def test_no_credential_reaches_any_output(tmp_path: Path) -> None:
    good = [*docs("ok", 30), {"no_text": 1}]
    files = {"in.jsonl": write_jsonl(tmp_path / "in.jsonl", good).read_bytes()}
    handler = type("Echo", (_Echo,), {"files": files})
    out = tmp_path / "out"
    out.mkdir()
    with serve(handler) as base:
        env = {
            **SECRETS,
            "AWS_ENDPOINT_URL": base,
            "AWS_REGION": "us-east-1",
            "TOKSHUF_STORAGE_RETRY_SECONDS": BUDGET,
            "TOKSHUF_CACHE_DIR": str(tmp_path / "cache"),
        }
        password, signature, credential, token = URL_SECRETS
        authority = base.replace("http://", f"http://reader:{password}@")
        signed = f"?X-Amz-Credential={credential}&X-Amz-Signature={signature}&X-Amz-Security-Token={token}"
        common = ["--tokenizer", "byte", "--progress", "json"]
        runs = [
            # A signed request refused, its canonical request (session token included) echoed.
            cli(
                "preprocess",
                "--input",
                "s3://bkt/in.jsonl",
                "--output-prefix",
                str(out / "a"),
                *common,
                env=env,
            ),
            cli(
                "shuffle",
                "--input",
                "s3://bkt/in.jsonl",
                "--local-cell-dir",
                str(out / "cells-b"),
                "--output",
                str(out / "b"),
                *common,
                env=env,
            ),
            # A URL with a password: failing, and read (its summary and skip lines list it).
            cli(
                "preprocess",
                "--input",
                f"{authority}/e500/in.jsonl",
                "--output-prefix",
                str(out / "c"),
                *common,
                env=env,
            ),
            cli(
                "preprocess",
                "--input",
                f"{authority}/ok/in.jsonl",
                "--output-prefix",
                str(out / "d"),
                *common,
                "--on-error",
                "skip",
                "--json",
                env=env,
            ),
            cli(
                "shuffle",
                "--input",
                f"{authority}/ok/in.jsonl",
                "--local-cell-dir",
                str(out / "cells-e"),
                "--output",
                str(out / "e"),
                *common,
                "--on-error",
                "skip",
                "--context-length",
                "33",
                env=env,
            ),
            # A signed URL that does not exist.
            cli(
                "preprocess",
                "--input",
                f"{base}/nothing/in.jsonl{signed}",
                "--output-prefix",
                str(out / "f"),
                *common,
                env=env,
            ),
            cli("inspect", f"{authority}/e500/ds_text_document", env=env),
        ]
        api = subprocess.run(
            [
                sys.executable,
                "-c",
                "import tokshuf, sys; tokshuf.IndexedDataset(sys.argv[1])",
                f"{authority}/e500/ds",
            ],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert [r.returncode for r in runs] == [1, 1, 1, 0, 0, 1, 1], [r.stderr[-300:] for r in runs]
    assert api.returncode == 1
    printed = "".join(r.stdout + r.stderr for r in [*runs, api])
    written = "".join(
        p.name + (p.read_text(errors="replace") if p.is_file() else "")
        for root in (out, tmp_path / "cache")
        for p in root.rglob("*")
    )
    # The failures are there, redacted.
    assert "403 Forbidden" in printed
    assert "http://***@127.0.0.1" in printed
    assert "X-Amz-Signature=***" in printed
    for marker in (*SECRETS.values(), *URL_SECRETS):
        assert marker not in printed, (marker, printed[max(0, printed.find(marker) - 300) :][:600])
        assert marker not in written, (
            marker,
            [
                str(p)
                for root in (out, tmp_path / "cache")
                for p in root.rglob("*")
                if p.is_file() and marker in p.read_text(errors="replace")
            ],
        )


def test_redact_masks_credentials_in_any_text() -> None:
    from tokshuf._storage import redact

    text = (
        "GET https://bkt.s3.amazonaws.com/k?X-Amz-Credential=AKID%2F1&X-Amz-Signature=ab12&x-id=GetObject; "
        "ftp-like s3://user:pw@host/key, x-amz-security-token:FwoG, Authorization: Basic dXNlcjpwYXNz\n"
        "GCS ?X-Goog-Signature=99&X-Goog-Credential=sa%40p, Azure ?sv=2024&sig=Zm9v%3D&se=1"
    )
    assert redact(text) == (
        "GET https://bkt.s3.amazonaws.com/k?X-Amz-Credential=***&X-Amz-Signature=***&x-id=GetObject; "
        "ftp-like s3://***@host/key, x-amz-security-token:***, Authorization: ***\n"
        "GCS ?X-Goog-Signature=***&X-Goog-Credential=***, Azure ?sv=2024&sig=***&se=1"
    )
