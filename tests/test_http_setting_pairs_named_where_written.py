"""A refusal of an HTTP setting that needs another (``ui_client_id`` an issuer, an introspection
client its secret), and of the token file or the one workspace a server with people told apart
cannot use, names each setting where the operator wrote it (D460): ``PATH:LINE: [http] key``
when toolhost.toml set it, an unset companion as the same file would write it (``[http]
issuer``), the variables when the environment set them, exactly as before. Through the real
``toolhost serve --http``, which refuses at its start: one line, exit code 2."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from loopback_ports import free_port
from pg_server import pg_database, pg_server  # noqa: F401 - fixtures
from test_config_file import write

from toolhost._testing.cli import run_toolhost

INBOX = "(the issuer the inbox's login goes through)"
WHOSE = "(whose tokens, for which server)"
EACH_A_URL = "each a URL (the issuer's, and this server's as its tokens name it)"
ONE_DIRECTORY = ("gives every session one directory, so with a token file or an issuer each "
                 "person would read and write the others' files: unset it (each run then gets "
                 "a workspace of its own), or serve that directory to one person on stdio")
#: An issuer and its keys named in the settings, so that no metadata is asked for.
ISSUER = '[http]\nissuer = "https://issuer.example"\naudience = "https://mcp.example/mcp"\n' \
         'jwks_url = "https://issuer.example/jwks"\n'


def serve_http(tmp_path: Path, body: str | None, *, bind: str = "127.0.0.1",
               command: list[str] | None = None, **env: str) -> tuple[str, Path]:
    """``toolhost serve --http`` with ``body`` as its toolhost.toml (after one line of comment,
    so its first key is on line 3; None: no file), refused at its start: (its stderr, the
    file)."""
    # Beside, not above, the directories a test serves (a workspace may not hold the file).
    (tmp_path / "etc").mkdir(exist_ok=True)
    path = write(tmp_path / "etc", f"# shared by the team\n{body or ''}")
    result = run_toolhost("serve", "--http", f"{bind}:{free_port()}", data_dir=tmp_path / "data",
                          plugins="", command=command, drop=("PG",),
                          env={"TOOLHOST_CONFIG": str(path) if body is not None else "", **env},
                          timeout=60)
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    return result.stderr, path


def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.toml"
    path.write_text(f'[[token]]\nsha256 = "{"0" * 64}"\nprincipal = "ada"\n')
    return path


def a_closed_issuer() -> str:
    """An issuer on loopback (plain http is allowed there) that nothing answers: its metadata
    cannot be read, so it names no endpoint."""
    return f"http://127.0.0.1:{free_port()}"


def test_an_inbox_client_without_an_issuer_names_the_files_keys(tmp_path: Path) -> None:
    stderr, path = serve_http(tmp_path, '[http]\nui_client_id = "inbox"\n')
    assert stderr == (f"toolhost: {path}:3: [http] ui_client_id needs [http] issuer and "
                      f"[http] audience {INBOX}\n")
    # The audience written too: named where it is.
    stderr, path = serve_http(tmp_path, '[http]\nui_client_id = "inbox"\n'
                                        'audience = "https://mcp.example/mcp"\n')
    assert stderr == (f"toolhost: {path}:3: [http] ui_client_id needs [http] issuer and "
                      f"{path}:4: [http] audience {INBOX}\n")
    # From the environment, as it always was.
    stderr, _ = serve_http(tmp_path, None, TOOLHOST_HTTP_UI_CLIENT_ID="inbox")
    assert stderr == ("toolhost: TOOLHOST_HTTP_UI_CLIENT_ID needs TOOLHOST_HTTP_ISSUER and "
                      f"TOOLHOST_HTTP_AUDIENCE {INBOX}\n")


def test_an_introspection_setting_without_an_issuer_is_named_by_its_key(tmp_path: Path) -> None:
    stderr, path = serve_http(tmp_path, '[http]\nintrospection_client_id = "toolhost"\n'
                                        'introspection_client_secret = "s"\n')
    assert stderr == (f"toolhost: {path}:3: [http] introspection_client_id needs [http] issuer "
                      f"and [http] audience {WHOSE}\n")
    stderr, _ = serve_http(tmp_path, None, TOOLHOST_HTTP_INTROSPECTION_CLIENT_ID="toolhost",
                           TOOLHOST_HTTP_INTROSPECTION_CLIENT_SECRET="s")
    assert stderr == ("toolhost: TOOLHOST_HTTP_INTROSPECTION_* settings need TOOLHOST_HTTP_ISSUER "
                      f"and TOOLHOST_HTTP_AUDIENCE {WHOSE}\n")


def test_an_issuer_without_an_audience_names_both_as_written(tmp_path: Path) -> None:
    stderr, path = serve_http(tmp_path, '[http]\nissuer = "https://issuer.example"\n')
    assert stderr == f"toolhost: {path}:3: [http] issuer and [http] audience go together, " \
                     f"{EACH_A_URL}\n"
    # One from each place: each named where it was written.
    stderr, path = serve_http(tmp_path, '[http]\nissuer = "https://issuer.example"\n',
                              TOOLHOST_HTTP_AUDIENCE="mcp.example")
    assert stderr == f"toolhost: {path}:3: [http] issuer and TOOLHOST_HTTP_AUDIENCE go " \
                     f"together, {EACH_A_URL}\n"
    stderr, _ = serve_http(tmp_path, None, TOOLHOST_HTTP_ISSUER="https://issuer.example")
    assert stderr == ("toolhost: TOOLHOST_HTTP_ISSUER and TOOLHOST_HTTP_AUDIENCE go together, "
                      f"{EACH_A_URL}\n")


def test_an_introspection_url_without_its_client_names_the_files_keys(tmp_path: Path) -> None:
    stderr, path = serve_http(
        tmp_path, f'{ISSUER}introspection_url = "https://issuer.example/introspect"\n')
    assert stderr == (f"toolhost: {path}:6: [http] introspection_url needs [http] "
                      "introspection_client_id and [http] introspection_client_secret\n")
    stderr, path = serve_http(
        tmp_path, ISSUER,
        TOOLHOST_HTTP_INTROSPECTION_URL="https://issuer.example/introspect")
    assert stderr == ("toolhost: TOOLHOST_HTTP_INTROSPECTION_URL needs "
                      "TOOLHOST_HTTP_INTROSPECTION_CLIENT_ID and _CLIENT_SECRET\n")


def test_an_introspection_client_without_its_secret_names_both_as_written(
        tmp_path: Path) -> None:
    body = (f'{ISSUER}introspection_url = "https://issuer.example/introspect"\n'
            'introspection_client_id = "toolhost"\n')
    stderr, path = serve_http(tmp_path, body)
    assert stderr == (f"toolhost: {path}:7: [http] introspection_client_id and [http] "
                      "introspection_client_secret go together\n")
    stderr, path = serve_http(tmp_path, body, TOOLHOST_HTTP_INTROSPECTION_CLIENT_ID="",
                              TOOLHOST_HTTP_INTROSPECTION_CLIENT_SECRET="s")
    assert stderr == ("toolhost: TOOLHOST_HTTP_INTROSPECTION_CLIENT_ID and "
                      "TOOLHOST_HTTP_INTROSPECTION_CLIENT_SECRET go together\n")


def test_an_issuer_whose_keys_cannot_be_found_is_named_at_its_line(tmp_path: Path) -> None:
    issuer = a_closed_issuer()
    stderr, path = serve_http(
        tmp_path, f'[http]\nissuer = "{issuer}"\naudience = "https://mcp.example/mcp"\n')
    assert stderr == (f"toolhost: cannot find the keys of {path}:3: [http] issuer: {issuer!r} "
                      "(no jwks_uri in its metadata): set [http] jwks_url\n")
    stderr, _ = serve_http(tmp_path, None, TOOLHOST_HTTP_ISSUER=issuer,
                           TOOLHOST_HTTP_AUDIENCE="https://mcp.example/mcp")
    assert stderr == (f"toolhost: cannot find the keys of TOOLHOST_HTTP_ISSUER {issuer!r} "
                      "(no jwks_uri in its metadata): set TOOLHOST_HTTP_JWKS_URL\n")


def test_an_issuer_without_an_introspection_endpoint_is_named_at_its_line(
        tmp_path: Path) -> None:
    issuer = a_closed_issuer()
    stderr, path = serve_http(
        tmp_path, f'[http]\nissuer = "{issuer}"\naudience = "https://mcp.example/mcp"\n'
                  'introspection_client_id = "toolhost"\nintrospection_client_secret = "s"\n')
    assert stderr == (f"toolhost: cannot find the introspection endpoint of {path}:3: [http] "
                      f"issuer: {issuer!r} (none in its metadata): set [http] "
                      "introspection_url\n")


@pytest.mark.skipif(importlib.util.find_spec("jwt") is None, reason="the oauth extra is absent")
def test_an_inbox_client_whose_issuer_names_no_login_is_named_at_its_line(
        tmp_path: Path) -> None:
    issuer = a_closed_issuer()
    stderr, path = serve_http(
        tmp_path, f'[http]\nissuer = "{issuer}"\naudience = "https://mcp.example/mcp"\n'
                  f'jwks_url = "{issuer}/jwks"\nui_client_id = "inbox"\n')
    assert stderr == (f"toolhost: {path}:6: [http] ui_client_id: the metadata of {issuer!r} "
                      "names no authorization_endpoint and token_endpoint\n")


def test_an_issuer_without_the_jwt_library_is_named_at_its_line(tmp_path: Path) -> None:
    # The library as not installed: what `find_spec` says of a module set to None.
    command = [sys.executable, "-c", "import sys; sys.modules['jwt'] = None; "
               "from toolhost._cli.main import main; sys.argv[0] = 'toolhost'; sys.exit(main())"]
    stderr, path = serve_http(tmp_path, ISSUER, command=command)
    assert stderr == (f"toolhost: {path}:3: [http] issuer needs the JWT library: pip install "
                      "'toolhost-core[oauth]'\n")


def test_a_token_file_that_is_not_a_file_is_named_at_its_line(tmp_path: Path) -> None:
    stderr, path = serve_http(tmp_path, f'[http]\ntokens_file = "{tmp_path}"\n')
    assert stderr == (f"toolhost: {path}:3: [http] tokens_file: {str(tmp_path)!r} is not a "
                      "regular file\n")
    stderr, _ = serve_http(tmp_path, None, TOOLHOST_HTTP_TOKENS_FILE=str(tmp_path))
    assert stderr == (f"toolhost: TOOLHOST_HTTP_TOKENS_FILE {str(tmp_path)!r} is not a regular "
                      "file\n")


def test_one_workspace_for_people_told_apart_is_named_at_its_line(tmp_path: Path) -> None:
    shared = tmp_path / "project"
    shared.mkdir()
    stderr, path = serve_http(tmp_path, f'[mcp]\nworkspace = "{shared}"\n'
                                        f'[http]\ntokens_file = "{tokens_file(tmp_path)}"\n')
    assert stderr == f"toolhost: {path}:3: [mcp] workspace {ONE_DIRECTORY}\n"


def test_a_pin_that_is_not_one_is_named_at_its_line(tmp_path: Path) -> None:
    stderr, path = serve_http(tmp_path, '[mcp]\npins = ["people.history"]\n')
    assert stderr == (f"toolhost: {path}:3: [mcp] pins expects NAME=VERSION, e.g. "
                      "people.history=1.0.0, not 'people.history'\n")


@pytest.mark.skipif(importlib.util.find_spec("psycopg") is None,
                    reason="the PostgreSQL client is not installed")
def test_a_shared_database_from_the_file_asks_for_the_files_advertise_url(
        tmp_path: Path, pg_database: str) -> None:  # noqa: F811 - the fixture
    stderr, _ = serve_http(tmp_path, f'[host]\ndatabase_url = "{pg_database}"\n'
                                     f'[http]\ntokens_file = "{tokens_file(tmp_path)}"\n',
                           bind="0.0.0.0")
    assert stderr == ("toolhost: serving on every address with a shared database: set [http] "
                      "advertise_url to the URL the other hosts reach this one's MCP endpoint "
                      "at (http://10.0.0.5:8000/mcp)\n")
    stderr, _ = serve_http(tmp_path, f'[http]\ntokens_file = "{tokens_file(tmp_path)}"\n',
                           bind="0.0.0.0", TOOLHOST_DATABASE_URL=pg_database)
    assert stderr == ("toolhost: serving on every address with a shared database: set "
                      "TOOLHOST_HTTP_ADVERTISE_URL to the URL the other hosts reach this one's "
                      "MCP endpoint at (http://10.0.0.5:8000/mcp)\n")


def test_an_unset_companion_is_written_as_the_demanding_settings_place_writes_it(
        tmp_path: Path) -> None:
    from toolhost._model.settings import Settings

    path = write(tmp_path, '# shared by the team\n[http]\nui_client_id = "inbox"\n')
    settings = Settings.from_environ({"TOOLHOST_CONFIG": str(path),
                                     "TOOLHOST_HTTP_AUDIENCE": "", "DEMO_LIMIT": "3"})
    beside = "TOOLHOST_HTTP_UI_CLIENT_ID"
    assert settings.written_beside("TOOLHOST_HTTP_ISSUER", beside) == "[http] issuer"
    # Set (even blank) in the environment: named where it was, which wins over the file.
    assert settings.written_beside("TOOLHOST_HTTP_AUDIENCE", beside) == "TOOLHOST_HTTP_AUDIENCE"
    assert settings.written_beside(beside, "DEMO_LIMIT") == f"{path}:3: [http] ui_client_id"
    # Beside a variable, or a name the host does not declare: the variable.
    assert settings.written_beside("TOOLHOST_HTTP_ISSUER", "DEMO_LIMIT") == "TOOLHOST_HTTP_ISSUER"
    assert settings.written_beside("DEMO_OTHER", beside) == "DEMO_OTHER"
