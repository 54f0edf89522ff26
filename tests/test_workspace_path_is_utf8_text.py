"""An operator's directory (``toolhost call --workspace``, TOOLHOST_MCP_WORKSPACE) whose path,
as given or resolved, is not UTF-8 text is refused at the start: one line, exit 2, nothing run.
A call that paused there could not record it (the record holds text), and its approval ran the
command in an empty workspace instead, its writes lost (D509, D516).

Real ``toolhost call`` and ``toolhost serve`` subprocesses; the bytes reach them as Python's
own arguments and environment carry them (PEP 383)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import invocation_rows

from toolhost._testing.cli import run_toolhost

#: A Latin-1 directory name ("projÿ"), as Python hands a child process its bytes.
NOT_UTF8 = os.fsdecode(b"proj\xff")
NOT_TEXT = ("not UTF-8 text, which the record cannot keep for a call paused for approval "
            "(its approval would run elsewhere): name a directory whose path is UTF-8 text")
WRITE = json.dumps({"path": "n.txt", "content": "made"})


def _refused(result: subprocess.CompletedProcess[str]) -> str:
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    (line,) = result.stderr.splitlines()
    return line


def test_call_refuses_a_directory_whose_path_is_not_utf8(tmp_path: Path) -> None:
    directory = tmp_path / NOT_UTF8
    directory.mkdir()
    link = tmp_path / "project"  # a UTF-8 name that resolves to it: the row records that
    link.symlink_to(directory)
    shown = repr(os.fsencode(directory))
    for given, line in (
            (directory, f"toolhost: --workspace {shown} is {NOT_TEXT}"),
            (link, f"toolhost: --workspace {str(link)!r} resolves to {shown}, {NOT_TEXT}")):
        called = run_toolhost("call", "workspace.write_text", "--workspace", str(given),
                              "--args", WRITE, data_dir=tmp_path / "data",
                              plugins="toolhost-workspace")
        assert _refused(called) == line
    # Nothing ran: no file in the directory, no row in the record.
    assert os.listdir(directory) == []
    database = tmp_path / "data" / "toolhost.sqlite3"
    assert not database.exists() or invocation_rows(database) == []


def test_serve_refuses_a_workspace_setting_whose_path_is_not_utf8(tmp_path: Path) -> None:
    directory = tmp_path / NOT_UTF8
    directory.mkdir()
    served = run_toolhost("serve", data_dir=tmp_path / "data", plugins="toolhost-workspace",
                          env={"TOOLHOST_MCP_WORKSPACE": str(directory)})
    assert _refused(served) == (
        f"toolhost: TOOLHOST_MCP_WORKSPACE {os.fsencode(directory)!r} is {NOT_TEXT}")
