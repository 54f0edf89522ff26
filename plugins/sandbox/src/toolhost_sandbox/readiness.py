"""What ``toolhost check`` reports about sandbox.run_command: whether isolation works here.

Its own module so that loading the plugin imports neither the probe's runner (subprocess,
seccomp) nor the tool's body: the readiness hook imports this when ``check`` calls it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from toolhost import Settings
from toolhost_sandbox.isolation import IsolationUnavailable, find_bwrap
from toolhost_sandbox.limits import LimitsUnavailable, SandboxesBusy, limits_for_call
from toolhost_sandbox.runner import run_sandboxed

__all__ = ["Readiness", "isolation_problem", "isolation_report"]


@dataclass(frozen=True, slots=True)
class Readiness:
    """``problem``: why no command can run here, or None. ``processes``: what limits the
    sandbox's processes (``CallLimits.mechanism``), once one was chosen."""

    problem: str | None
    processes: str | None


def isolation_report(settings: Settings) -> Readiness:
    """The same checks a call makes, then ``true`` run in a real sandbox over an empty
    directory, under the process limit a call would get."""
    try:
        bwrap = find_bwrap(settings)
        limits = limits_for_call(settings)
    except SandboxesBusy:
        # Calls are running in every sandbox this host has: it works, and is full for now.
        return Readiness(None, "a sandbox uid of its own (all in use by calls now: not probed)")
    except (IsolationUnavailable, LimitsUnavailable) as exc:
        return Readiness(exc.reason, None)
    processes = limits.mechanism
    try:
        with tempfile.TemporaryDirectory(prefix="toolhost-sandbox-probe-") as empty:
            fd = os.open(empty, os.O_RDONLY | os.O_DIRECTORY)
            try:
                completed = run_sandboxed(bwrap, fd, "true", timeout_s=10,
                                          on_cancel=_no_cancellation, limits=limits,
                                          measure=None)
            finally:
                os.close(fd)
    except (IsolationUnavailable, LimitsUnavailable) as exc:
        return Readiness(exc.reason, processes)
    finally:  # the uid's lease and the cgroup, whatever failed (the temporary directory too)
        limits.release()
    if completed.exit_code != 0:
        return Readiness(f"a probe command ended with {json.dumps(completed.exit_code)}",
                         processes)
    return Readiness(None, processes)


def isolation_problem(settings: Settings) -> str | None:
    """Why no command can run here (one line for the operator), or None."""
    return isolation_report(settings).problem


def _no_cancellation(callback: Callable[[], None]) -> Callable[[], None]:
    return lambda: None
