"""The reasons sandbox.run_command declares, with their static model-facing messages.

Everything else it can end with is the host's: a schema failure, the pipeline's own timeout
or cancellation (a run deadline shorter than ``timeout_s``), a workspace that cannot be used.
A command that fails, times out or floods its output is not a failure of the tool: the result
says how it ended.
"""

from __future__ import annotations

from toolhost import Reason

__all__ = ["ISOLATION_UNAVAILABLE", "MESSAGES", "RUN_COMMAND_REASONS", "SANDBOX_BUSY"]

#: No working isolation on this host (no bwrap, no user namespaces, no process limit, a
#: sandbox that would not start). Not retryable: the host does not change between a call and
#: its retry, and the tool never falls back to running the command unsandboxed.
ISOLATION_UNAVAILABLE = "tool.upstream_unavailable.isolation_unavailable"

#: Every sandbox uid of the host (TOOLHOST_SANDBOX_UIDS) is in use by other calls: a moment's
#: shortage on a root host, so retryable (D323).
SANDBOX_BUSY = "tool.upstream_unavailable.sandbox_busy"

MESSAGES: dict[str, str] = {
    ISOLATION_UNAVAILABLE: (
        "No command was run: this host has no working sandbox. Retrying will not help; "
        "tell the user that running commands is unavailable here."
    ),
    SANDBOX_BUSY: (
        "No command was run: every sandbox on this host is in use by other calls. Retry in "
        "a moment."
    ),
}

RUN_COMMAND_REASONS = Reason.from_table(MESSAGES, ISOLATION_UNAVAILABLE, SANDBOX_BUSY)
