"""The one reason sandbox.run_command declares, with its static model-facing message.

Everything else it can end with is the host's: a schema failure, the pipeline's own timeout
or cancellation (a run deadline shorter than ``timeout_s``), a workspace that cannot be used.
A command that fails, times out or floods its output is not a failure of the tool: the result
says how it ended.
"""

from __future__ import annotations

from toolhost import Reason

__all__ = ["ISOLATION_UNAVAILABLE", "MESSAGES", "RUN_COMMAND_REASONS"]

#: No working isolation on this host (no bwrap, no user namespaces, no process limit, a
#: sandbox that would not start). Not retryable: the host does not change between a call and
#: its retry, and the tool never falls back to running the command unsandboxed.
ISOLATION_UNAVAILABLE = "tool.upstream_unavailable.isolation_unavailable"

MESSAGES: dict[str, str] = {
    ISOLATION_UNAVAILABLE: (
        "No command was run: this host has no working sandbox. Retrying will not help; "
        "tell the user that running commands is unavailable here."
    ),
}

RUN_COMMAND_REASONS = Reason.from_table(MESSAGES, ISOLATION_UNAVAILABLE)
