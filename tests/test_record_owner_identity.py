"""The owner a SQLite record names this process by is not kept incomplete.

The identity is read once from ``/proc`` (boot id, pid namespace, start time) and kept for the
process's life. Read while the process had no file descriptor left (EMFILE, under load), it
was kept as host and pid alone for good: every row the process owned afterwards fell back to
the host+pid check, which after a reboot that reused the pid says alive for ever (D85). A read
that fails in passing is no longer kept; the next one is whole.
"""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = """
import json, os, resource
from toolhost._adapters.sqlite_invocations import this_process

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
lowest = os.open("/dev/null", os.O_RDONLY)
os.close(lowest)
resource.setrlimit(resource.RLIMIT_NOFILE, (lowest, hard))  # no descriptor can be opened
try:
    starved = this_process()
finally:
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
print(json.dumps([starved, this_process(), this_process()]))
"""


def test_an_identity_read_without_descriptors_is_read_again_whole() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=120, check=True)
    starved, later, kept = json.loads(done.stdout)
    assert sorted(starved) == ["host", "pid"]  # all it could read then
    assert sorted(later) == ["boot", "host", "pid", "pid_ns", "start"]
    assert later["pid"] == starved["pid"] and kept == later
