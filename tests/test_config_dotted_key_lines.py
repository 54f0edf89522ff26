"""A dotted key of toolhost.toml (``env.X = 3``, ``host.log_level = "loud"``) is named at its own
line, as every other key is (D460 left it at its table's header, or at line 1 for a table no
header opens). Through the real ``toolhost`` command, and the line scan stays linear."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_config_file import from_file, write

from toolhost._model.config_file import MAX_CONFIG_BYTES, _key_lines
from toolhost._testing.cli import run_toolhost

NOT_A_STRING = 'must be a string or a reference ({ env = "NAME" } or { file = "PATH" })'

#: (toolhost.toml after a line of comment, the refusal after its "PATH:LINE: ").
REFUSED = [
    ('[mcp.servers.tracker]\ncommand = "/bin/true"\nenv.GOOD = "1"\nenv.X = 3\n',
     f"5: [mcp.servers.tracker] env.X: {NOT_A_STRING}"),
    ('[mcp.servers.tracker]\ncommand = "/bin/true"\nenv . "X" = 3\n',
     f"4: [mcp.servers.tracker] env.X: {NOT_A_STRING}"),
    ('[mcp.servers.tracker]\ncommand = "/bin/true"\nenv.GOOD = "1"\nenv."1X" = "a"\n',
     "5: [mcp.servers.tracker] env: '1X' is not an environment variable name"),
    ('mcp.servers.tracker.command = "/bin/true"\n\nmcp.servers.tracker.tools.t.risk = "huge"\n',
     "4: [mcp.servers.tracker.tools.t] risk: must be one of LOW, MEDIUM, HIGH, not 'huge'"),
    ('[host]\ndata_dir = "/tmp"\n\n[mcp]\nservers.tracker.url = "ftp://x"\n',
     '6: [mcp.servers.tracker] url: must be an http:// or https:// URL (or a reference: '
     '{ env = "NAME" } or { file = "PATH" })'),
    ('\nhost.log_level = "loud"\n',
     "3: [host] log_level: is 'loud', not a log level: set it to one of debug, info, warning, "
     "error, critical (or leave it unset for warning)"),
    ('\n\npolicy."CODE_EXECUTION/HIGH" = "often"\n',
     "4: [policy] entry 'CODE_EXECUTION/HIGH': 'often' is not an action (allow|approval|deny)"),
    ("\nhttp = 3\n", "3: http: must be a table ([http])"),
]


@pytest.mark.parametrize(("body", "refusal"), REFUSED, ids=[r[1].split(":")[1].strip() for r in REFUSED])
def test_a_dotted_key_is_named_at_its_own_line(tmp_path: Path, body: str, refusal: str) -> None:
    path = write(tmp_path, f"# shared by the team\n{body}")
    result = run_toolhost("check", data_dir=tmp_path / "data", plugins="",
                          env={"TOOLHOST_CONFIG": str(path)}, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (
        2, "", f"toolhost: {path}:{refusal}\n")


def test_a_dotted_keys_value_is_sourced_at_its_own_line(tmp_path: Path) -> None:
    path = write(tmp_path, '# shared by the team\n\nhost.log_level = "debug"\n'
                           'policy."CODE_EXECUTION/HIGH" = "deny"\n')
    settings = from_file(path)
    assert settings.source_of("TOOLHOST_LOG_LEVEL") == f"{path}:3"
    assert settings.source_of("TOOLHOST_POLICY") == f"{path}:4"
    assert settings.written("TOOLHOST_LOG_LEVEL") == f"{path}:3: [host] log_level"


def test_the_scan_of_dotted_keys_is_linear() -> None:
    n = MAX_CONFIG_BYTES
    for line in ("a." * (n // 2), "a ." * (n // 3), '"x".' * (n // 4), "a." + '"' + "\\" * n,
                 "a" + " ." * (n // 2) + "=", "a." * (n // 2) + "=", "a.'" + "x" * n):
        started = time.monotonic()
        _key_lines(line)
        assert time.monotonic() - started < 5.0, line[:8]


@pytest.mark.parametrize("quotes", ['"""', "'''"])
def test_a_table_and_a_key_inside_a_multi_line_string_are_not_taken_for_real_ones(
        tmp_path: Path, quotes: str) -> None:
    # A plugin's text holding "[host]" and "ca_bundle = ..." lines named the real ca_bundle
    # at the line inside the string (the scan kept the first it met).
    missing = str(tmp_path / "nope.pem")
    path = write(tmp_path, f'# c\n[plugins.notes]\ntext = {quotes}\n[host]\nca_bundle = "/fake"\n'
                           f'{quotes}\n[host]\nartifact_store = "s3://bucket/x"\n'
                           f'ca_bundle = "{missing}"\n')
    result = run_toolhost("pending", data_dir=tmp_path / "data", plugins="", drop=("AWS_",),
                          env={"TOOLHOST_CONFIG": str(path)}, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (
        2, "", f"toolhost: {path}:9: [host] ca_bundle: {missing!r} is not a file: point it at "
                "a PEM file of extra CA certificates, or unset it\n")
    assert _key_lines(path.read_text())[("host", "ca_bundle")] == 9
    # One string closing and the next opening on a line, and one written on a line of its own.
    text = 'a = """x""" \nb = """\n[t]\n"""\n[u]\nc = 1\n'
    assert _key_lines(text) == {("", "a"): 1, ("", "b"): 2, ("u", ""): 5, ("u", "c"): 6}


def test_a_delimiter_in_a_comment_or_a_one_line_string_opens_no_multi_line_string() -> None:
    # Counted as opening one that never closed, it hid every later header and key: their
    # refusals named line 1.
    text = '# notes use """\n[host]\nx = 1\nm = \'"""\'\nn = "\\""""\ny = 2\n'
    assert _key_lines(text) == {("host", ""): 2, ("host", "x"): 3, ("host", "m"): 4,
                                ("host", "n"): 5, ("host", "y"): 6}
    # A one-line string left open runs to its line's end: the search never starts inside it
    # again, so a line of them costs its length, not its square.
    n = MAX_CONFIG_BYTES
    for line in ('"""x"""' + '"\\"\\' * (n // 4), '"""x"""' + "'a" * (n // 2),
                 '"""x""" "' + "\\" * n):
        started = time.monotonic()
        _key_lines(line)
        assert time.monotonic() - started < 5.0, line[:12]
