"""people.context 1.0.0: what the cache says about one person.

Their addresses and display names, first and last interaction, counts per direction, and the
threads with the latest interactions. Every list and string is bounded by a constant the
output schema states; a list holds the first that many (most used, or latest, first).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolhost import Services, ToolCallable, ToolExecutionContext, ToolFailure, ToolOutput
from toolhost_people.common import (
    ADDRESS,
    DATE,
    KEY,
    NAME,
    PERSON_ID,
    PERSON_ID_OUT,
    PROVENANCE,
    SUBJECT,
    rendered,
    spec,
)
from toolhost_people.messages import UNKNOWN_PERSON

__all__ = ["MAX_ADDRESSES", "MAX_NAMES", "MAX_THREADS", "SPEC", "build"]

MAX_ADDRESSES = 20
MAX_NAMES = 10
MAX_THREADS = 10

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"person_id": PERSON_ID},
    "required": ["person_id"],
    "additionalProperties": False,
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "person_id": PERSON_ID_OUT,
        "name": NAME,
        "addresses": {"type": "array", "items": ADDRESS, "maxItems": MAX_ADDRESSES},
        "names": {"type": "array", "items": NAME, "maxItems": MAX_NAMES},
        "first_interaction": DATE,
        "last_interaction": DATE,
        "sent": {"type": "integer", "minimum": 0},
        "received": {"type": "integer", "minimum": 0},
        "recent_threads": {
            "type": "array", "maxItems": MAX_THREADS,
            "items": {
                "type": "object",
                "properties": {
                    "thread_id": KEY,
                    "subject": SUBJECT,
                    "last_interaction": DATE,
                    "interactions": {"type": "integer", "minimum": 1},
                },
                "required": ["thread_id", "subject", "last_interaction", "interactions"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["person_id", "name", "addresses", "names", "first_interaction",
                 "last_interaction", "sent", "received", "recent_threads"],
    "additionalProperties": False,
}

DESCRIPTION = (
    "What the owner's email says about one person (person_id from people.search): their "
    "addresses (up to 20, most used first), the display names the mail gives them (up to 10, "
    "most used first; name is the first, \"\" if none), the dates of the first and last "
    "interaction (RFC 3339 UTC, null when no message had a date), how many messages the "
    "owner sent to and received from them, and up to 10 threads with the most recent "
    "interactions (thread_id, the subject and date of the latest message, and how many of "
    "the person's messages it holds). Use people.history for the messages themselves. "
    + PROVENANCE
)

SPEC = spec("people.context", "1.0.0", DESCRIPTION, INPUT_SCHEMA, OUTPUT_SCHEMA)


def build(services: Services) -> ToolCallable:
    from toolhost_people import index
    from toolhost_people.store import Opened, PeopleStore

    store = PeopleStore.of(services)

    def person_context(arguments: Mapping[str, Any],
                       context: ToolExecutionContext) -> ToolOutput:
        person_id = arguments["person_id"]
        def read(opened: Opened) -> tuple[index.PersonRow, list[str], list[str],
                                          list[index.ThreadRow]]:
            person = index.person(opened.people, person_id)
            if person is None:
                raise ToolFailure(UNKNOWN_PERSON)
            return (person,
                    index.addresses_of(opened.people, [person_id], MAX_ADDRESSES)[person_id],
                    index.names_of(opened.people, person_id, MAX_NAMES),
                    index.recent_threads(opened.people, person_id, MAX_THREADS))

        person, addresses, names, threads = store.read(read, context.principal.id)
        structured = {
            "person_id": person.person_id,
            "name": person.name,
            "addresses": addresses,
            "names": names,
            "first_interaction": person.first_date,
            "last_interaction": person.last_date,
            "sent": person.sent,
            "received": person.received,
            "recent_threads": [
                {"thread_id": t.thread_id, "subject": t.subject, "last_interaction": t.last_date,
                 "interactions": t.interactions}
                for t in threads
            ],
        }
        return ToolOutput(structured=structured, content=rendered(structured))

    return person_context
