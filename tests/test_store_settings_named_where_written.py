"""A refusal of ``[host] ca_bundle``, ``artifact_store`` or ``database_url`` names the value where
the operator wrote it (D460): ``PATH:LINE: [host] key: ...`` when toolhost.toml set it, the
variable when the environment did, the same exit code and one line either way. Through the real
``toolhost`` command: ``pending`` opens the stores, ``check`` a gateway server's TLS context."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from pg_server import pg_database, pg_server  # noqa: F401 - fixtures
from test_config_file import write

from toolhost._testing.cli import run_toolhost

NOT_A_FILE = "is not a file: point it at a PEM file of extra CA certificates, or unset it"
NOT_A_BUCKET = ("is not s3://bucket or s3://bucket/prefix (a bucket name is 3 to 63 lower-case "
                "letters, digits, '.' or '-')")
NOT_A_DATABASE = "is neither a postgresql:// URL nor a libpq conninfo string"
needs_psycopg = pytest.mark.skipif(importlib.util.find_spec("psycopg") is None,
                                   reason="the PostgreSQL client is not installed")


def _toolhost(tmp_path: Path, command: str, body: str, **env: str) -> tuple[int, str, Path]:
    """``toolhost COMMAND`` with ``body`` as its toolhost.toml (after one line of comment, so
    its first key is on line 3): (exit code, stderr, the file)."""
    path = write(tmp_path, f"# shared by the team\n{body}")
    result = run_toolhost(command, data_dir=tmp_path / "data", plugins="", drop=("AWS_", "PG"),
                          env={"TOOLHOST_CONFIG": str(path), **env}, timeout=60)
    assert result.stdout == "", result.stdout
    return result.returncode, result.stderr, path


def test_a_missing_trust_bundle_is_named_at_its_line_before_the_s3_store_reads_it(
        tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such.pem")
    body = f'[host]\nca_bundle = "{missing}"\nartifact_store = "s3://toolhost-artifacts/x"\n'
    code, stderr, path = _toolhost(tmp_path, "pending", body)
    assert (code, stderr) == (
        2, f"toolhost: {path}:3: [host] ca_bundle: {missing!r} {NOT_A_FILE}\n")
    # Set in the environment (which wins), it is named by its variable, as before.
    code, stderr, _ = _toolhost(tmp_path, "pending", body, TOOLHOST_CA_BUNDLE=missing)
    assert (code, stderr) == (2, f"toolhost: TOOLHOST_CA_BUNDLE={missing!r} {NOT_A_FILE}\n")


def test_a_trust_bundle_that_is_not_pem_is_named_at_its_line_for_a_gateway_server(
        tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra is not installed")
    bundle = tmp_path / "der.crt"
    bundle.write_bytes(b"0\x82\x01\x0a not a PEM file")
    body = (f'[host]\nca_bundle = "{bundle}"\n'
            '[mcp.servers.tracker]\nurl = "https://127.0.0.1:1/mcp"\n')
    code, stderr, path = _toolhost(tmp_path, "check", body)
    assert (code, stderr) == (
        2, f"toolhost: {path}:3: [host] ca_bundle: {str(bundle)!r} could not be loaded as a "
           "PEM CA bundle (SSLError): point it at a file of PEM 'BEGIN CERTIFICATE' blocks, or "
           "unset it\n")


def test_an_artifact_store_that_is_not_a_bucket_is_named_at_its_line_without_its_secret(
        tmp_path: Path) -> None:
    body = '[host]\nartifact_store = "s3://AKIAEXAMPLE:wJalr/XUtnFEMIsecret@Bad_Bucket/x"\n'
    code, stderr, path = _toolhost(tmp_path, "pending", body)
    assert (code, stderr) == (
        2, f"toolhost: {path}:3: [host] artifact_store: 's3://***@Bad_Bucket/x' "
           f"{NOT_A_BUCKET}\n")



@pytest.mark.parametrize("value", ["s3:/AKIAEXAMPLE:wJalr/XUtnFEMIsecret@bucket",
                                   "AKIAEXAMPLE:wJalr/XUtnFEMIsecret@bucket/x"])
def test_an_artifact_store_that_is_no_url_shows_no_secret_either(
        tmp_path: Path, value: str) -> None:
    # Only a secret after a literal "://" was masked: one without it was shown whole.
    shown = "***@bucket" if value.startswith("s3:/") else "***@bucket/x"
    code, stderr, path = _toolhost(tmp_path, "pending", f'[host]\nartifact_store = "{value}"\n')
    assert (code, stderr) == (2, f"toolhost: {path}:3: [host] artifact_store: {shown!r} "
                                 f"{NOT_A_BUCKET}\n")
    code, stderr, _ = _toolhost(tmp_path, "pending", "", TOOLHOST_ARTIFACT_STORE=value)
    assert (code, stderr) == (2, f"toolhost: TOOLHOST_ARTIFACT_STORE={shown!r} {NOT_A_BUCKET}\n")

@needs_psycopg
def test_a_database_url_that_is_not_one_is_named_at_its_line(tmp_path: Path) -> None:
    code, stderr, path = _toolhost(tmp_path, "pending",
                                   '[host]\ndatabase_url = "not a url at all ==="\n')
    assert (code, stderr) == (2, f"toolhost: {path}:3: [host] database_url: {NOT_A_DATABASE}\n")


@needs_psycopg
def test_an_artifact_store_beside_a_database_is_named_at_its_line_too(
        tmp_path: Path, pg_database: str) -> None:  # noqa: F811 - the fixture
    """With a database URL the bucket's metadata goes there (another adapter): the same line."""
    body = f'[host]\nartifact_store = "s3://x"\ndatabase_url = "{pg_database}"\n'
    code, stderr, path = _toolhost(tmp_path, "pending", body)
    assert (code, stderr) == (
        2, f"toolhost: {path}:3: [host] artifact_store: 's3://x' {NOT_A_BUCKET}\n")


def test_a_database_url_without_the_postgresql_client_is_named_as_written(
        tmp_path: Path) -> None:
    # A psycopg that cannot be imported, first on the path: the client as not installed.
    blocked = tmp_path / "site"
    blocked.mkdir()
    (blocked / "psycopg.py").write_text(
        'raise ImportError("not installed, for the test", name="psycopg")\n')
    path = write(tmp_path, '# shared by the team\n[host]\ndatabase_url = "postgresql://h/db"\n')
    result = run_toolhost("pending", data_dir=tmp_path / "data", plugins="", path=[blocked],
                          env={"TOOLHOST_CONFIG": str(path)}, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (
        1, "", f"toolhost: {path}:3: [host] database_url needs the PostgreSQL client, which is "
               "not installed (psycopg): pip install 'toolhost-core[postgres]'\n")


NOT_AN_ENDPOINT = "is not an endpoint: set it to http(s)://host[:port], or unset it for AWS itself"


@pytest.mark.parametrize("endpoint", ["http://[::1", "notaurl", "ftp://x", "http://h:99999",
                                      "http://h/?x=1"])
@pytest.mark.parametrize("command", ["pending", "check"])
def test_an_s3_endpoint_that_is_not_one_is_named_at_its_line(
        tmp_path: Path, endpoint: str, command: str) -> None:
    """``http://[::1`` was urllib's traceback from inside boto3 at the first command that
    opened the stores (exit 1), and ``check`` said ok."""
    body = f'[host]\nartifact_store = "s3://toolhost-artifacts/x"\ns3_endpoint_url = "{endpoint}"\n'
    code, stderr, path = _toolhost(tmp_path, command, body)
    assert (code, stderr) == (
        2, f"toolhost: {path}:4: [host] s3_endpoint_url: {endpoint!r} {NOT_AN_ENDPOINT}\n")
    # From the environment, by its variable; boto3's own variable is checked alike.
    for name in ("TOOLHOST_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL"):
        code, stderr, _ = _toolhost(tmp_path, command, "",
                                    TOOLHOST_ARTIFACT_STORE="s3://toolhost-artifacts/x",
                                    **{name: endpoint})
        assert (code, stderr) == (2, f"toolhost: {name}={endpoint!r} {NOT_AN_ENDPOINT}\n")


def test_an_s3_endpoint_refused_shows_no_credential(tmp_path: Path) -> None:
    code, stderr, _ = _toolhost(tmp_path, "pending", "",
                                TOOLHOST_ARTIFACT_STORE="s3://toolhost-artifacts/x",
                                TOOLHOST_S3_ENDPOINT_URL="http://KEY:se/cret@[::1")
    assert (code, stderr) == (
        2, f"toolhost: TOOLHOST_S3_ENDPOINT_URL='http://***@[::1' {NOT_AN_ENDPOINT}\n")


NOT_BOTOCORES = ("is not an endpoint botocore accepts: its host must be an IP address or a DNS "
                 "name (letters, digits and '-', labels of up to 63 characters; no '_')")


@pytest.mark.parametrize("endpoint", [
    "http://my_minio:9000", "http://m\u00fcnchen.example:9000",
    f"http://{'a' * 64}.example:9000", f"http://{'a.' * 127}aa:9000"],
    ids=["underscore", "idn", "label-over-63", "host-over-255"])
@pytest.mark.parametrize("command", ["pending", "check"])
def test_an_s3_endpoint_whose_host_botocore_refuses_is_one_line_at_check_too(
        tmp_path: Path, endpoint: str, command: str) -> None:
    """These passed ``check`` (exit 0), then every command that opened the stores died with
    botocore's ``ValueError: Invalid endpoint: <the URL as written>`` traceback (exit 1)."""
    pytest.importorskip("botocore", reason="the toolhost-core[s3] extra is not installed")
    body = f'[host]\nartifact_store = "s3://toolhost-artifacts/x"\ns3_endpoint_url = "{endpoint}"\n'
    code, stderr, path = _toolhost(tmp_path, command, body)
    assert (code, stderr) == (
        2, f"toolhost: {path}:4: [host] s3_endpoint_url: {endpoint!r} {NOT_BOTOCORES}\n")


def test_an_s3_endpoint_botocore_refuses_shows_no_credential(tmp_path: Path) -> None:
    pytest.importorskip("botocore", reason="the toolhost-core[s3] extra is not installed")
    code, stderr, _ = _toolhost(tmp_path, "pending", "",
                                TOOLHOST_ARTIFACT_STORE="s3://toolhost-artifacts/x",
                                AWS_ENDPOINT_URL="http://minio:hunter2secret@minio_server:9000")
    assert (code, stderr) == (
        2, f"toolhost: AWS_ENDPOINT_URL='http://***@minio_server:9000' {NOT_BOTOCORES}\n")


def test_an_s3_client_botocore_refuses_to_build_is_one_line_with_the_url_masked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever botocore refuses at construction (a region; an endpoint its installed version
    refuses and the check let through) is a SettingError, never its ValueError quoting the URL."""
    pytest.importorskip("boto3", reason="the toolhost-core[s3] extra is not installed")
    from toolhost._adapters import s3_artifacts
    from toolhost._model.settings import SettingError

    with pytest.raises(SettingError, match=r"^boto3 refused the S3 settings: Provided region_name "
                                           r"'bad region' doesn't match a supported format\.$"):
        s3_artifacts.s3_client({"AWS_REGION": "bad region"})
    # A botocore stricter than the check: its refusal passes through, its password masked.
    monkeypatch.setattr(s3_artifacts, "check_endpoint_url", lambda url, named: None)
    with pytest.raises(SettingError) as refused:
        s3_artifacts.s3_client({"AWS_ENDPOINT_URL": "http://KEY:secret@my_minio:9000"})
    assert str(refused.value) == (
        "boto3 refused the S3 settings: Invalid endpoint: http://***@my_minio:9000")
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


def test_an_s3_client_built_without_the_composition_refuses_the_endpoint_in_one_line() -> None:
    pytest.importorskip("boto3", reason="the toolhost-core[s3] extra is not installed")
    from toolhost._adapters.s3_artifacts import check_endpoint_url, s3_client
    from toolhost._model.settings import SettingError

    with pytest.raises(SettingError, match=r"^TOOLHOST_S3_ENDPOINT_URL='http://\[::1' is not "):
        s3_client({"TOOLHOST_S3_ENDPOINT_URL": "http://[::1"})
    for usable in ("http://[::1]:9000", "https://s3.example.org/base/", "http://127.0.0.1:9000",
                   "HTTP://minio:9000/", "http://[fe80::1%25eth0]:9000", "http://minio.:9000"):
        check_endpoint_url(usable, named="X")
        assert s3_client({"AWS_ENDPOINT_URL": usable}) is not None
