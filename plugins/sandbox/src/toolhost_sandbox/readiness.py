"""What ``toolhost check`` reports about sandbox.run_command: whether isolation works here.

Its own module so that loading the plugin imports neither the probe's runner (subprocess,
seccomp) nor the tool's body: the readiness hook imports this when ``check`` calls it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable

from toolhost import Settings
from toolhost_sandbox.isolation import IsolationUnavailable, find_bwrap
from toolhost_sandbox.limits import LimitsUnavailable, cgroup_for_call
from toolhost_sandbox.runner import run_sandboxed

__all__ = ["isolation_problem"]


def isolation_problem(settings: Settings) -> str | None:
    """Why no command can run here (one line for the operator), or None: the same checks a
    call makes, then ``true`` run in a real sandbox over an empty directory."""
    try:
        bwrap = find_bwrap(settings)
        cgroup = cgroup_for_call()
    except (IsolationUnavailable, LimitsUnavailable) as exc:
        return exc.reason
    try:
        with tempfile.TemporaryDirectory(prefix="toolhost-sandbox-probe-") as empty:
            fd = os.open(empty, os.O_RDONLY | os.O_DIRECTORY)
            try:
                completed = run_sandboxed(bwrap, fd, "true", timeout_s=10,
                                          on_cancel=_no_cancellation, cgroup=cgroup,
                                          measure=None)
            finally:
                os.close(fd)
                if cgroup is not None:
                    cgroup.remove()
    except (IsolationUnavailable, LimitsUnavailable) as exc:
        return exc.reason
    if completed.exit_code != 0:
        return f"a probe command ended with {json.dumps(completed.exit_code)}"
    return None


def _no_cancellation(callback: Callable[[], None]) -> Callable[[], None]:
    return lambda: None
