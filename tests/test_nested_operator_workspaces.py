"""An operator's workspace may not nest with another live run's (``toolhost call --workspace``,
``TOOLHOST_MCP_WORKSPACE``): one run's tools (an approved sandboxed command) could replace the
inner directory with a link to any directory on the host, which the other run then opened as
its workspace and wrote there without an approval. The same directory stays shareable. Real
processes, real first-party plugins, one data directory per test."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from toolhost._testing.cli import run_toolhost

PLUGINS = "toolhost-workspace"
_RISK = ("live on this host, where either run's tools could replace the inner directory, or one "
         "on its way, with a link to any directory on the host: name a directory that neither "
         "holds it nor is inside it, or end that run (toolhost runs end {run})")


def _call(data: Path, workspace: Path, run: str, name: str = "workspace.list_files",
          arguments: object = None, **env: str) -> subprocess.CompletedProcess[str]:
    return run_toolhost("call", name, "--args", json.dumps(arguments or {"path": ""}),
                        "--workspace", str(workspace), "--run", run, data_dir=data,
                        plugins=PLUGINS, env=env)


def _refused(result: subprocess.CompletedProcess[str]) -> str:
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_a_workspace_inside_another_live_runs_is_refused_even_through_a_link_it_planted(
        tmp_path: Path) -> None:
    data, outer, victim = tmp_path / "data", tmp_path / "outer", tmp_path / "victim"
    (outer / "inner").mkdir(parents=True)
    victim.mkdir()
    assert _call(data, outer, "OUTER").returncode == 0
    inner = outer / "inner"
    assert _refused(_call(data, inner, "INNER")) == (
        f"toolhost: --workspace {str(inner)!r} is inside the workspace of run 'OUTER' "
        f"({str(outer)!r}), " + _RISK.format(run="OUTER"))
    # What OUTER's approved command did in the review: the inner directory is now a link
    # (made here directly). Before: INNER's unapproved write_text landed in the target.
    inner.rmdir()
    inner.symlink_to(victim)
    write = {"path": "planted.txt", "content": "by the model"}
    assert _refused(_call(data, inner, "INNER", "workspace.write_text", write)).startswith(
        f"toolhost: --workspace {str(inner)!r} is inside the workspace of run 'OUTER' ")
    assert list(victim.iterdir()) == []
    # The same directory is shared (a server's sessions share theirs); a sibling is apart.
    assert _call(data, outer, "OTHER").returncode == 0
    (tmp_path / "beside").mkdir()
    assert _call(data, tmp_path / "beside", "BESIDE").returncode == 0
    # Once OUTER has ended, its directory is the operator's own again.
    for run in ("OUTER", "OTHER"):
        assert run_toolhost("runs", "end", run, data_dir=data, plugins=PLUGINS).returncode == 0
    inner.unlink()
    inner.mkdir()
    assert _call(data, inner, "INNER").returncode == 0


def test_a_workspace_holding_another_live_runs_is_refused(tmp_path: Path) -> None:
    data, outer = tmp_path / "data", tmp_path / "outer"
    (outer / "inner").mkdir(parents=True)
    assert _call(data, outer / "inner", "INNER").returncode == 0
    assert _refused(_call(data, outer, "OUTER")) == (
        f"toolhost: --workspace {str(outer)!r} holds the workspace of run 'INNER' "
        f"({str(outer / 'inner')!r}), " + _RISK.format(run="INNER"))


def test_a_link_elsewhere_to_a_directory_inside_a_live_runs_is_refused(tmp_path: Path) -> None:
    # Compared resolved too: a link outside both names the directory inside.
    data, outer = tmp_path / "data", tmp_path / "outer"
    (outer / "inner").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(outer / "inner")
    assert _call(data, outer, "OUTER").returncode == 0
    assert _refused(_call(data, tmp_path / "alias", "INNER")).startswith(
        f"toolhost: --workspace {str(tmp_path / 'alias')!r} is inside the workspace of run "
        "'OUTER' ")


def test_serve_refuses_a_workspace_inside_a_live_runs_at_its_start(tmp_path: Path) -> None:
    data, outer = tmp_path / "data", tmp_path / "outer"
    (outer / "inner").mkdir(parents=True)
    assert _call(data, outer, "OUTER").returncode == 0
    served = run_toolhost("serve", data_dir=data, plugins=PLUGINS,
                          env={"TOOLHOST_MCP_WORKSPACE": str(outer / "inner")}, timeout=120)
    assert _refused(served) == (
        f"toolhost: TOOLHOST_MCP_WORKSPACE {str(outer / 'inner')!r} is inside the workspace of "
        f"run 'OUTER' ({str(outer)!r}), " + _RISK.format(run="OUTER"))


@pytest.mark.skipif(os.geteuid() != 0, reason="a bind mount takes root")
def test_a_workspace_reached_through_a_bind_mount_of_another_live_runs_is_refused(
        tmp_path: Path) -> None:
    # realpath does not see through a bind mount: the review wrote through mnt/inner after
    # OUTER's link swap. Directories on the way are compared by identity too.
    data, outer, mnt, victim = (tmp_path / n for n in ("data", "outer", "mnt", "victim"))
    (outer / "inner").mkdir(parents=True)
    mnt.mkdir()
    victim.mkdir()
    subprocess.run(["mount", "--bind", str(outer), str(mnt)], check=True)
    try:
        assert _call(data, outer, "OUTER").returncode == 0
        (outer / "inner").rmdir()
        (outer / "inner").symlink_to(victim)
        through = mnt / "inner"
        write = {"path": "planted.txt", "content": "by the model"}
        assert _refused(_call(data, through, "INNER", "workspace.write_text", write)) == (
            f"toolhost: --workspace {str(through)!r} is inside the workspace of run 'OUTER' "
            f"({str(outer)!r}), " + _RISK.format(run="OUTER"))
        assert list(victim.iterdir()) == []
        # The same directory through the mount is the same directory: shared, not nested.
        assert _call(data, mnt, "OUTER2").returncode == 0
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="a bind mount takes root")
def test_a_bind_mount_of_a_directory_below_another_live_runs_is_seen_both_ways(
        tmp_path: Path) -> None:
    # A bind of OUTER's inner/ at b: b/deeper is inside OUTER's directory in its filesystem
    # though no path to it passes OUTER's; and a run on b's parent side holds nothing of it.
    data, outer, b = tmp_path / "data", tmp_path / "x" / "outer", tmp_path / "b"
    (outer / "inner" / "deeper").mkdir(parents=True)
    b.mkdir()
    subprocess.run(["mount", "--bind", str(outer / "inner"), str(b)], check=True)
    try:
        assert _call(data, outer, "OUTER").returncode == 0
        assert _refused(_call(data, b / "deeper", "INNER")) == (
            f"toolhost: --workspace {str(b / 'deeper')!r} is inside the workspace of run "
            f"'OUTER' ({str(outer)!r}), " + _RISK.format(run="OUTER"))
        assert _toolhost_runs_end(data, "OUTER")
        # The other way round: a live run in the bind's subdirectory, a new one on x.
        assert _call(data, b / "deeper", "DEEP").returncode == 0
        assert _refused(_call(data, tmp_path / "x", "WIDE")) == (
            f"toolhost: --workspace {str(tmp_path / 'x')!r} holds the workspace of run 'DEEP' "
            f"({str(b / 'deeper')!r}), " + _RISK.format(run="DEEP"))
    finally:
        subprocess.run(["umount", "-l", str(b)], check=True)


def _toolhost_runs_end(data: Path, run: str) -> bool:
    return run_toolhost("runs", "end", run, data_dir=data, plugins=PLUGINS).returncode == 0
