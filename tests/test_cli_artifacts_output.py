"""`toolhost artifacts get -o`: the output path an operator names (from a security review).

``-o /dev/null`` or ``-o /dev/stdout`` are what an operator types to discard or see the bytes;
as root, replacing whatever is there with a new regular file would replace the system's own
``/dev/null`` (a device) or ``/dev/stdout`` (a symlink). The same happens to any FIFO or
symlink, which these tests use instead.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from toolhost.testing import run_toolhost

CONTENT = b"artifact bytes\n"


def toolhost(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_toolhost("artifacts", *args, data_dir=data, plugins="")


@pytest.fixture
def artifact_id(tmp_path: Path) -> str:
    source = tmp_path / "a.txt"
    source.write_bytes(CONTENT)
    done = toolhost(tmp_path / "data", "upload", str(source), "--conversation", "conv-1")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_get_into_a_fifo_does_not_replace_it(tmp_path: Path, artifact_id: str) -> None:
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    # A reader is already there, so a get that writes through the FIFO cannot block.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        done = toolhost(tmp_path / "data", "get", artifact_id, "-o", str(fifo))
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a file"
        if done.returncode == 0:
            assert os.read(reader, 1024) == CONTENT
        else:
            assert done.stderr.startswith("toolhost: ") and done.stderr.count("\n") == 1
    finally:
        os.close(reader)


def test_get_to_a_symlink_does_not_replace_the_link(tmp_path: Path, artifact_id: str) -> None:
    target = tmp_path / "target.txt"
    target.write_bytes(b"old\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    done = toolhost(tmp_path / "data", "get", artifact_id, "-o", str(link))
    assert link.is_symlink(), "the symlink was replaced by a file"
    if done.returncode == 0:
        assert target.read_bytes() == CONTENT
    else:
        assert target.read_bytes() == b"old\n"
