"""A real S3-compatible server for the tests (moto in server mode, on 127.0.0.1), behind a small
HTTP proxy that injects faults at seeded random points: dropped connections, 503 SlowDown and
500 answers, bodies cut short, 412 (the object changed), a Range header ignored, a request held
without an answer. tokshuf talks to the proxy; the tests set up buckets and read results
straight from the server with boto3.
"""

from __future__ import annotations

import http.client
import random
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULTS = ("drop", "503", "500", "cut")
#: The faults answered with an S3 error, and their codes.
ERROR_CODES = {"503": "SlowDown", "500": "InternalError", "412": "PreconditionFailed", "403": "AccessDenied"}

DENIED_KEYS = '<?xml version="1.0" encoding="UTF-8"?><DeleteResult>{errors}</DeleteResult>'
DENIED_KEY = "<Error><Key>{key}</Key><Code>AccessDenied</Code><Message>injected</Message></Error>"

ERROR_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>injected</Message></Error>'
)


@dataclass
class Faults:
    """Which requests fail, and how: each request whose path contains ``only`` (all, if empty)
    and whose method is ``method`` (any, if empty), past the first ``after`` such requests,
    fails with probability ``rate``, drawing the kind from ``kinds``, at most ``limit`` times
    (no limit if negative); ``seed`` fixes the draws. Besides :data:`FAULTS`: ``412`` (a
    precondition failed: the object changed), ``403`` (access denied), ``denykeys`` (a
    multi-object delete answered as AWS refuses one: 200, with an error for each key),
    ``norange`` (the Range header is dropped: the whole object comes back with 200), ``hang`` (no
    answer until the faults are cleared)."""

    rate: float = 0.0
    kinds: tuple[str, ...] = FAULTS
    only: str = ""
    method: str = ""
    after: int = 0
    limit: int = -1
    seed: int = 0
    injected: int = 0
    seen: int = 0
    released: threading.Event = field(default_factory=threading.Event)
    _rng: random.Random = field(default_factory=random.Random)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def draw(self, method: str, path: str) -> str | None:
        with self._lock:
            if self.rate <= 0 or (self.only and self.only not in path):
                return None
            if self.method and self.method != method:
                return None
            self.seen += 1
            if self.seen <= self.after or self.injected == self.limit:
                return None
            if self._rng.random() >= self.rate:
                return None
            self.injected += 1
            return self._rng.choice(self.kinds)


class _Proxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: tuple[str, int]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream = upstream
        self.faults = Faults()
        #: (method, path part, action): ``action`` runs once, before such a request is forwarded.
        self.before: tuple[str, str, Callable[[], None]] | None = None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Proxy

    def log_message(self, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        hook = self.server.before
        if hook is not None and self.command == hook[0] and hook[1] in self.path:
            self.server.before = None
            hook[2]()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        faults = self.server.faults
        fault = faults.draw(self.command, self.path)
        if fault == "hang":
            faults.released.wait(60)
            fault = "drop"
        if fault == "drop":
            self.close_connection = True
            return
        if fault in ERROR_CODES or fault == "denykeys":
            if fault == "denykeys":
                keys = re.findall(rb"<Key>(.*?)</Key>", body or b"")
                errors = "".join(DENIED_KEY.format(key=k.decode()) for k in keys)
                status, payload = 200, DENIED_KEYS.format(errors=errors).encode()
            else:
                status, payload = int(fault), ERROR_BODY.format(code=ERROR_CODES[fault]).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        conn = http.client.HTTPConnection(*self.server.upstream, timeout=60)
        dropped = (
            ("connection", "keep-alive", "range") if fault == "norange" else ("connection", "keep-alive")
        )
        headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped}
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length", "keep-alive"):
                self.send_header(k, v)
        declared = resp.getheader("Content-Length")
        self.send_header(
            "Content-Length", declared if self.command == "HEAD" and declared else str(len(data))
        )
        self.end_headers()
        if self.command == "HEAD":
            return
        if fault == "cut" and len(data) > 1:
            # The headers promise the whole body; the connection closes half way.
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward


class S3Server:
    """moto's S3 server and the fault proxy in front of it."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._moto.start()
        host, port = self._moto.get_host_and_port()
        self.server_url = f"http://{host}:{port}"
        self._proxy = _Proxy((host, port))
        threading.Thread(target=self._proxy.serve_forever, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self._proxy.server_address[1]}"
        import boto3

        self.client = boto3.client(
            "s3",
            endpoint_url=self.server_url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def env(self) -> dict[str, str]:
        """What a tokshuf process needs to reach the server (through the proxy)."""
        return {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self.endpoint,
        }

    def bucket(self, name: str) -> str:
        self.client.create_bucket(Bucket=name)
        return name

    def put(self, bucket: str, key: str, data: bytes) -> str:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)
        return f"s3://{bucket}/{key}"

    def get(self, bucket: str, key: str) -> bytes:
        body: bytes = self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
        return body

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))

    def uploads(self, bucket: str) -> list[str]:
        """The keys of the multipart uploads begun in ``bucket`` and neither completed nor aborted."""
        return [u["Key"] for u in self.client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]

    @contextmanager
    def faults(
        self,
        rate: float,
        seed: int = 0,
        kinds: tuple[str, ...] = FAULTS,
        only: str = "",
        method: str = "",
        after: int = 0,
        limit: int = -1,
    ) -> Iterator[Faults]:
        self._proxy.faults = f = Faults(
            rate=rate,
            kinds=kinds,
            only=only,
            method=method,
            after=after,
            limit=limit,
            seed=seed,
            _rng=random.Random(seed),
        )
        try:
            yield f
        finally:
            self._proxy.faults = Faults()
            f.released.set()

    @contextmanager
    def before(self, method: str, only: str, action: Callable[[], None]) -> Iterator[None]:
        """Run ``action`` once, just before the first ``method`` request whose path contains
        ``only`` reaches the server: another process's writes landing between two of tokshuf's
        requests, at a chosen point instead of by chance."""
        self._proxy.before = (method, only, action)
        try:
            yield
        finally:
            self._proxy.before = None

    def stop(self) -> None:
        self._proxy.shutdown()
        self._moto.stop()
