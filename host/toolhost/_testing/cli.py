"""The ``toolhost`` command run from a test as an operator runs it: a child process with a
data directory of the test's choosing and an environment that holds none of the machine's
``TOOLHOST_*`` settings and no operator configuration file, only what the test gives it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, overload

__all__ = ["run_toolhost", "toolhost_command"]


def toolhost_command() -> list[str]:
    """The installed ``toolhost`` console script beside the running interpreter (what an
    operator runs), or ``python -m toolhost._cli`` where the script is not installed."""
    script = shutil.which("toolhost", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "toolhost._cli"]


@overload
def run_toolhost(
    *args: str, data_dir: Path, plugins: str | None = ..., env: Mapping[str, str] | None = ...,
    drop: Sequence[str] = ..., path: Sequence[Path] = ..., command: Sequence[str] | None = ...,
    input: str | None = ..., cwd: Path | None = ..., timeout: float = ...,
    text: Literal[True] = ...,
) -> subprocess.CompletedProcess[str]: ...


@overload
def run_toolhost(
    *args: str, data_dir: Path, plugins: str | None = ..., env: Mapping[str, str] | None = ...,
    drop: Sequence[str] = ..., path: Sequence[Path] = ..., command: Sequence[str] | None = ...,
    input: bytes | None = ..., cwd: Path | None = ..., timeout: float = ...,
    text: Literal[False],
) -> subprocess.CompletedProcess[bytes]: ...


def run_toolhost(
    *args: str,
    data_dir: Path,
    plugins: str | None = None,
    env: Mapping[str, str] | None = None,
    drop: Sequence[str] = (),
    path: Sequence[Path] = (),
    command: Sequence[str] | None = None,
    input: str | bytes | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
    text: bool = True,
) -> subprocess.CompletedProcess[Any]:
    """``toolhost ARGS`` in a child process; its exit status, stdout and stderr captured.

    :param data_dir: its ``TOOLHOST_DATA_DIR`` (made by the command when missing).
    :param plugins: its ``TOOLHOST_PLUGINS`` (``""`` loads none); ``None``: every installed
        plugin.
    :param env: variables set last, over everything else (``TOOLHOST_CONFIG`` included).
    :param drop: prefixes of further variables of this process the child must not see
        (``("AWS_",)``); ``TOOLHOST_`` ones never reach it.
    :param path: directories put first on its ``PYTHONPATH`` (a throwaway plugin's site).
    :param command: the program and leading arguments to run instead of ``toolhost_command()``
        (a wrapper around it, say); ``ARGS`` follow it.
    :param input: its standard input; none (``/dev/null``) by default.
    :param text: decode stdout and stderr (and encode ``input``) as text.
    """
    prefixes = ("TOOLHOST_", *drop)
    child = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    # No operator's toolhost.toml (~/.config/toolhost): only the settings the test gives.
    child.update(TOOLHOST_DATA_DIR=str(data_dir), TOOLHOST_CONFIG="")
    if plugins is not None:
        child["TOOLHOST_PLUGINS"] = plugins
    if path:
        child["PYTHONPATH"] = os.pathsep.join(
            [*map(str, path), *filter(None, [child.get("PYTHONPATH")])])
    child.update(env or {})
    argv = [*(toolhost_command() if command is None else command), *args]
    return subprocess.run(
        argv, capture_output=True, text=text, env=child, cwd=cwd, timeout=timeout,
        input=input, stdin=subprocess.DEVNULL if input is None else None, check=False,
    )
