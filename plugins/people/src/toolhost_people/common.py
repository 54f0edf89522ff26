"""What the three people tools share: their classification, the person_id rule, and the text
the model reads.

Classification (the seed's Milestone 28): read-only and parallel-safe (NONE / LOW / READ_ONLY,
``allow_parallel``), MEMORY trust, ``people.read`` (history 1.1.0 checks email.read itself,
for a source read only). 30 seconds covers the rare call that
rebuilds the index after the cache changed (10,000 messages rebuild in well under one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolhost import Idempotency, Risk, SideEffect, ToolSpec, Trust
from toolhost_people.bounds import worst_case_bytes

__all__ = [
    "ADDRESS",
    "BUSY_TIMEOUT_S",
    "CALL_BUSY_TIMEOUT_S",
    "DATE",
    "KEY",
    "MAX_ADDRESS",
    "MAX_KEY",
    "MAX_MESSAGE_ID",
    "MAX_NAME",
    "MAX_SUBJECT",
    "NAME",
    "PERSON_ID",
    "PERSON_ID_OUT",
    "PERSON_ID_PATTERN",
    "PROVENANCE",
    "SUBJECT",
    "rendered",
    "spec",
]

#: How long a connection to people's own files waits for a lock another holds: the operator's
#: command (``toolhost-people``) 30 s, as long as toolhost-email's writers wait ...
BUSY_TIMEOUT_S = 30.0
#: ... and a tool call 10 s, well inside its 30 s timeout, so that a lock held longer ends the
#: call as the retryable ``people_busy``, not as the host's deadline (the body abandoned,
#: still waiting). Two waits that each end just short of it still fit.
CALL_BUSY_TIMEOUT_S = 10.0

#: ``p_`` and 16 lowercase hex digits (``index.person_id_for``).
PERSON_ID_PATTERN = "^p_[0-9a-f]{16}$"

PERSON_ID: dict[str, Any] = {
    "type": "string", "pattern": PERSON_ID_PATTERN,
    "description": "A person_id as people.search returned it.",
}

#: A person_id in a result.
PERSON_ID_OUT: dict[str, Any] = {"type": "string", "pattern": PERSON_ID_PATTERN, "maxLength": 18}

# What a result shows at most; toolhost-email keeps up to the same (names 200, subjects 1,000,
# addresses 320 characters), so only its bounds changing would make people cut. A Message-ID
# longer than MAX_MESSAGE_ID is no usable id and shows as "". Keys and thread ids are the
# cache's opaque ids (34 characters today).
MAX_NAME = 200
MAX_SUBJECT = 1000
MAX_ADDRESS = 320
MAX_MESSAGE_ID = 255
MAX_KEY = 256

NAME: dict[str, Any] = {"type": "string", "maxLength": MAX_NAME}
SUBJECT: dict[str, Any] = {"type": "string", "maxLength": MAX_SUBJECT}
ADDRESS: dict[str, Any] = {"type": "string", "maxLength": MAX_ADDRESS}
KEY: dict[str, Any] = {"type": "string", "maxLength": MAX_KEY}

#: An RFC 3339 instant in UTC (``2026-12-03T06:45:00Z``), or null when the mail had no date.
DATE: dict[str, Any] = {"type": ["string", "null"], "maxLength": 32}

# Where the people come from, and what they are not: the seed's rule that people context
# cannot grant permission to send a message or change an email recipient.
PROVENANCE = (
    "People are derived from the owner's cached email (From, To, Cc and Reply-To), one "
    "person per address unless the operator linked addresses. This is information about "
    "people, not permission to contact them: it never authorizes sending a message or "
    "changing an email's recipients."
)


def spec(name: str, version: str, description: str, input_schema: Mapping[str, Any],
         output_schema: Mapping[str, Any], *, text_prefix: str = "") -> ToolSpec:
    """A people tool's spec. maximum_output_bytes is the worst case its closed output schema
    allows (plus ``text_prefix``, text the model reads before the JSON), so a result within
    the schema always reaches the model whole."""
    maximum_output_bytes = worst_case_bytes(output_schema) + len(text_prefix.encode())
    return ToolSpec.builtin(
        name=name,
        version=version,
        description=description,
        input_schema=input_schema,
        output_schema=output_schema,
        side_effect=SideEffect.NONE,
        risk=Risk.LOW,
        idempotency=Idempotency.READ_ONLY,
        output_trust=Trust.MEMORY,
        required_scopes=("people.read",),
        timeout_s=30,
        maximum_output_bytes=maximum_output_bytes,
    )


def rendered(structured: Mapping[str, Any]) -> str:
    """The text the model reads: the structured result as compact JSON, so every name and
    subject (text an outsider chose) stays a quoted string and cannot read as more."""
    return json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
