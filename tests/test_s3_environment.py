"""The S3 store's client takes where the bucket is and how to reach it from toolhost's settings
alone, as every outbound client of the host does (D327): a proxy variable, boto3's own
endpoint variables and config files, and ``AWS_CA_BUNDLE`` change nothing, and
``TOOLHOST_CA_BUNDLE`` is trusted. Against moto's S3 server and a loopback HTTPS server.
"""

from __future__ import annotations

import socket
import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from loopback_ports import free_port
from s3_server import S3Server, s3_bucket_fixture, s3_server_fixture  # noqa: F401 - fixtures

from toolhost._adapters.http import HttpConfigError, trust_roots_file
from toolhost._adapters.s3_artifacts import s3_client
from toolhost.testing import loopback_tls_server

LOOPBACK = "127.0.0.1"


class Proxy:
    """A loopback listener standing for a proxy: what each connection to it sent first (each
    closed at once, so a client that used it would fail)."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []
        self._listener = socket.create_server((LOOPBACK, 0))
        self._listener.settimeout(0.1)
        self.url = f"http://{LOOPBACK}:{self._listener.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.seen.append(conn.recv(200))
                except OSError:
                    self.seen.append(b"")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    listening = Proxy()
    yield listening
    listening.close()


def test_proxy_variables_are_not_used(s3_server: S3Server, s3_bucket: str, proxy: Proxy,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, proxy.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = s3_client(s3_server.env(s3_bucket))
    assert client.head_bucket(Bucket=s3_bucket)["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert proxy.seen == []


def test_boto3s_own_endpoint_settings_are_not_used(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://{LOOPBACK}:{free_port()}")
    config = tmp_path / "aws-config"
    config.write_text(f"[default]\nendpoint_url = http://{LOOPBACK}:{free_port()}\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    client = s3_client({"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "k",
                        "AWS_SECRET_ACCESS_KEY": "s"})
    assert client.meta.endpoint_url == "https://s3.eu-west-1.amazonaws.com"
    named = s3_client({"TOOLHOST_S3_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_REGION": "eu-west-1",
                       "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"})
    assert named.meta.endpoint_url == "http://127.0.0.1:9"


class _Bucket(BaseHTTPRequestHandler):
    """Any bucket exists: 200 to a HEAD."""

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_toolhost_ca_bundle_is_trusted_and_aws_ca_bundle_is_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with loopback_tls_server(_Bucket, tmp_path) as server:
        settings = {"TOOLHOST_S3_ENDPOINT_URL": server.base_url, "AWS_REGION": "us-east-1",
                    "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
        trusted = s3_client({**settings, "TOOLHOST_CA_BUNDLE": str(server.ca_bundle)})
        assert trusted.head_bucket(Bucket="b")["ResponseMetadata"]["HTTPStatusCode"] == 200
        monkeypatch.setenv("AWS_CA_BUNDLE", str(server.ca_bundle))
        from botocore.exceptions import SSLError  # type: ignore[import-untyped, unused-ignore]

        with pytest.raises(SSLError):
            s3_client(settings).head_bucket(Bucket="b")


def test_the_roots_file_is_in_a_directory_of_this_process_alone(tmp_path: Path) -> None:
    import trustme

    bundle = tmp_path / "extra.pem"
    trustme.CA().cert_pem.write_to_path(str(bundle))
    path = Path(trust_roots_file({"TOOLHOST_CA_BUNDLE": str(bundle)}))
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    roots = "".join(path.read_text().split())
    assert "".join(bundle.read_text().split()) in roots  # the bundle's, beside the defaults
    assert roots.count("-----BEGINCERTIFICATE-----") > 1
    assert trust_roots_file({"TOOLHOST_CA_BUNDLE": str(bundle)}) == str(path)  # written once


def test_a_bundle_that_is_not_pem_is_refused_as_for_every_client(tmp_path: Path) -> None:
    bundle = tmp_path / "der.crt"
    bundle.write_bytes(b"0\x82\x01\x0a not a PEM file")
    with pytest.raises(HttpConfigError, match="could not be loaded as a PEM CA bundle"):
        s3_client({"TOOLHOST_CA_BUNDLE": str(bundle), "AWS_REGION": "us-east-1",
                   "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"})


def test_a_self_signed_server_certificate_in_the_bundle_is_in_the_roots_file(
        tmp_path: Path) -> None:
    """A bundle may name one server's own certificate (self-signed, not a CA: a MinIO's).
    The first roots file came from the context's CA list, which leaves it out, and boto3
    then refused that server."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "s3.internal")])
    now = dt.datetime.now(dt.UTC)
    leaf = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(LOOPBACK))]), critical=False)
            .sign(key, hashes.SHA256()))
    bundle = tmp_path / "minio.pem"
    bundle.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    roots = "".join(Path(trust_roots_file({"TOOLHOST_CA_BUNDLE": str(bundle)})).read_text()
                    .split())
    assert "".join(bundle.read_text().split()) in roots
