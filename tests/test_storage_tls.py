"""Object storage over TLS: an ``https://`` dataset is read through rustls (ring's primitives,
the crypto provider tokshuf installs at start-up), the server's certificate verified against the
system's roots (here ``SSL_CERT_FILE``, which the verifier reads), and an untrusted certificate is
an error naming the object, never a read.

Each read runs in a fresh process: the verifier reads the roots once per process."""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import os
import re
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tokshuf

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402
from test_storage import _FileServer  # noqa: E402


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _ca(directory: Path, common: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(_name(common))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (directory / f"{common}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ca.pem`` (the root that signed the server's certificate), ``other.pem`` (a root that did
    not), and the server's ``server.pem`` and ``server.key`` for 127.0.0.1."""
    d = tmp_path_factory.mktemp("certs")
    ca_key, ca_cert = _ca(d, "ca")
    _ca(d, "other")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .sign(ca_key, hashes.SHA256())
    )
    (d / "server.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / "server.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return d


@pytest.fixture
def https_dataset(tmp_path: Path, certs: Path) -> Iterator[tuple[Path, str]]:
    """A small ``.bin/.idx`` dataset, and its URL on an HTTPS server on 127.0.0.1."""
    local = tmp_path / "ds"
    with tokshuf.IndexedDatasetWriter(local, np.uint16) as w:
        for i in range(40):
            w.add_document(list(range(1, 2 + i % 9)), [i % 9 + 1])
    served = tmp_path / "www"
    served.mkdir()
    for ext in ("idx", "bin"):
        shutil.copy(f"{local}.{ext}", served / f"ds.{ext}")
    handler = type("Handler", (_FileServer,), {"root": served, "etag": "none"})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "server.pem", certs / "server.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield local, f"https://127.0.0.1:{server.server_port}/ds"
    finally:
        server.shutdown()
        server.server_close()


READ = """
import sys, numpy as np, tokshuf
local, url = tokshuf.IndexedDataset(sys.argv[1]), tokshuf.IndexedDataset(sys.argv[2])
assert len(url) == len(local)
assert all(np.array_equal(url[i], local[i]) for i in range(len(local)))
print("read", len(url))
"""


def _read(local: Path, url: str, roots: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SSL_CERT_FILE": str(roots),
        "TOKSHUF_STORAGE_RETRY_SECONDS": "1",
        "TOKSHUF_CACHE_DIR": str(tmp_path / f"cache-{roots.stem}"),
    }
    return subprocess.run(
        [sys.executable, "-c", READ, str(local), url],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_an_https_dataset_is_read_over_tls(
    https_dataset: tuple[Path, str], certs: Path, tmp_path: Path
) -> None:
    local, url = https_dataset
    done = _read(local, url, certs / "ca.pem", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "read 40"


def test_an_untrusted_certificate_is_an_error(
    https_dataset: tuple[Path, str], certs: Path, tmp_path: Path
) -> None:
    local, url = https_dataset
    done = _read(local, url, certs / "other.pem", tmp_path)
    assert done.returncode != 0
    # An error naming the object (the set's commit record is the first one read) and the cause.
    assert re.search(r"OSError: .*https://127\.0\.0\.1:\d+/ds", done.stderr), done.stderr
    assert "certificate" in done.stderr, done.stderr
    assert "panic" not in done.stderr.lower(), done.stderr
