"""people.search 1.0.0: people whose names or addresses contain the query.

Case- and width-insensitive: the query and every name and address are compared folded (NFKC,
casefold: ``fold``), so a fullwidth ``ANNA`` finds Anna. The order is total and documented
(``index.search``), so the same cache and query always give the same list.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolhost import Services, ToolCallable, ToolExecutionContext, ToolFailure, ToolOutput
from toolhost_people.common import ADDRESS, DATE, NAME, PERSON_ID_OUT, PROVENANCE, rendered, spec
from toolhost_people.fold import fold
from toolhost_people.messages import BLANK_QUERY

__all__ = ["ADDRESSES_PER_ENTRY", "MAX_LIMIT", "MAX_QUERY_LENGTH", "SPEC", "build"]

MAX_QUERY_LENGTH = 200
MAX_LIMIT = 25
DEFAULT_LIMIT = 10
#: Addresses shown per entry (most used first); people.context lists them all.
ADDRESSES_PER_ENTRY = 5

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string", "minLength": 1, "maxLength": MAX_QUERY_LENGTH,
            "description": "Part of a name or an email address, 1 to 200 characters; case "
            "and character width do not matter.",
        },
        "limit": {
            "type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT,
            "description": "How many people to return at most, 1 to 25 (default 10).",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}

ENTRY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "person_id": PERSON_ID_OUT,
        "name": NAME,
        "addresses": {"type": "array", "items": ADDRESS, "maxItems": ADDRESSES_PER_ENTRY},
        "sent": {"type": "integer", "minimum": 0},
        "received": {"type": "integer", "minimum": 0},
        "last_interaction": DATE,
    },
    "required": ["person_id", "name", "addresses", "sent", "received", "last_interaction"],
    "additionalProperties": False,
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "people": {"type": "array", "items": ENTRY, "maxItems": MAX_LIMIT},
        "more": {"type": "boolean"},
    },
    "required": ["people", "more"],
    "additionalProperties": False,
}

DESCRIPTION = (
    "Find people the owner has exchanged email with, by part of a name or an email address "
    "(case and character width do not matter). Returns up to limit people (at most 25), "
    "best match first: a whole name or address equal to the query, then one starting with "
    "it, then a word starting with it, then any other match; ties go to the person with more "
    "interactions, then the more recent. Each has a person_id (for people.context and "
    "people.history), the name the mail most often gives them (\"\" if none), up to 5 "
    "addresses, how many messages the owner sent to and received from them, and the date of "
    "the last one. more is true when more people matched than were returned. " + PROVENANCE
)

SPEC = spec("people.search", "1.0.0", DESCRIPTION, INPUT_SCHEMA, OUTPUT_SCHEMA)


def build(services: Services) -> ToolCallable:
    from toolhost_people import index
    from toolhost_people.store import Opened, PeopleStore

    store = PeopleStore.of(services)

    def search(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        query = fold(arguments["query"])
        if not query:
            raise ToolFailure(BLANK_QUERY)
        limit = arguments["limit"]
        def read(opened: Opened) -> tuple[list[index.SearchRow], dict[str, list[str]]]:
            rows = index.search(opened.people, query, limit + 1)
            shown = [r.person_id for r in rows[:limit]]
            return rows, (index.addresses_of(opened.people, shown, ADDRESSES_PER_ENTRY)
                          if shown else {})

        rows, addresses = store.read(read, context.principal.id)
        shown = rows[:limit]
        structured = {
            "people": [
                {"person_id": r.person_id, "name": r.name, "addresses": addresses[r.person_id],
                 "sent": r.sent, "received": r.received, "last_interaction": r.last_date}
                for r in shown
            ],
            "more": len(rows) > limit,
        }
        return ToolOutput(structured=structured, content=rendered(structured))

    return search
