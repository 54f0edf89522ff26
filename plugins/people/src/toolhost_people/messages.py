"""The reasons the people tools may end with, each with its static model-facing message.

Messages carry the remedy and never the input. Everything else a call can end with is the
host's (a schema failure, a missing scope, a deadline).
"""

from __future__ import annotations

from toolhost import Reason, SchemaRule

__all__ = [
    "BAD_CURSOR",
    "BLANK_QUERY",
    "BUSY",
    "CACHE_UNAVAILABLE",
    "CONTEXT_REASONS",
    "HISTORY_V1_0_REASONS",
    "HISTORY_V1_1_REASONS",
    "INDEX_UNAVAILABLE",
    "MESSAGES",
    "QUERY_TOO_LONG",
    "SEARCH_REASONS",
    "SOURCE_SCOPE",
    "SOURCE_UNAVAILABLE",
    "SOURCE_WITH_CURSOR",
    "UNKNOWN_INTERACTION",
    "UNKNOWN_PERSON",
]

#: No person has that id (never had, or the mail that made them was erased).
UNKNOWN_PERSON = "tool.not_found.unknown_person"
#: The person has no interaction with that id.
UNKNOWN_INTERACTION = "tool.not_found.unknown_interaction"
#: The interaction is known but its original is no longer retained (erased since).
SOURCE_UNAVAILABLE = "tool.not_found.source_unavailable"
#: A cursor this tool did not hand out for this person.
BAD_CURSOR = "tool.invalid_arguments.bad_cursor"
BLANK_QUERY = "tool.invalid_arguments.blank_query"
QUERY_TOO_LONG = "tool.invalid_arguments.query_too_long"
#: 1.1.0: a source read is one interaction, not a page.
SOURCE_WITH_CURSOR = "tool.invalid_arguments.source_with_cursor"
#: toolhost-email's cache exists but cannot be read (damaged, or of a newer layout): the
#: operator's to fix, so not retryable.
CACHE_UNAVAILABLE = "tool.upstream_unavailable.people_source_unavailable"
#: The cache or people's index stayed locked past the wait (an import, an erase or a rebuild
#: holds it; people's own files are waited for 10 s, well inside the call's 30 s): retryable.
BUSY = "tool.upstream_unavailable.people_busy"
#: people's own files (index, links) cannot be used, and deleting the derived index did not
#: help (a directory in its place, no permission, damaged again): the operator's to fix.
INDEX_UNAVAILABLE = "tool.upstream_unavailable.people_index_unavailable"
#: 1.1.0: a source read without email.read granted (checked before anything is read).
SOURCE_SCOPE = "tool.permission_denied.source_scope"

MESSAGES: dict[str, str] = {
    UNKNOWN_PERSON: "No person has that person_id. Use a person_id that people.search "
    "returned.",
    UNKNOWN_INTERACTION: "That person has no interaction with that interaction_id. Use one "
    "that people.history returned for the same person_id.",
    SOURCE_UNAVAILABLE: "The original email of that interaction is no longer retained.",
    BAD_CURSOR: "That cursor is not one people.history returned for this person_id. Omit "
    "cursor to start from the newest interaction.",
    BLANK_QUERY: "query has nothing to search for. Give part of a name or an email address.",
    QUERY_TOO_LONG: "query is longer than 200 characters. Give part of a name or an email "
    "address.",
    SOURCE_WITH_CURSOR: "Give either interaction_id (to read one original email) or cursor "
    "(to page through the history), not both.",
    CACHE_UNAVAILABLE: "The mail cache people are derived from cannot be read here. "
    "Retrying will not help; tell the user that people lookups are unavailable.",
    BUSY: "The mail cache or the people index is busy (an import, an erase or a rebuild is "
    "running). Retry in a moment.",
    INDEX_UNAVAILABLE: "People's own files on this host cannot be used. Retrying will not "
    "help; tell the user that people lookups are unavailable.",
    SOURCE_SCOPE: "Reading an original email needs the email.read scope, which this run is "
    "not granted. Omit interaction_id to page the history, or ask the user for that access.",
}


#: The input-schema rules that fail with a tool's own code rather than the host's schema
#: failure. A malformed person_id or cursor: nothing was handed out under it either way, and
#: the message says where one comes from.
_RULES: dict[str, list[SchemaRule]] = {
    UNKNOWN_PERSON: [SchemaRule("/person_id", "pattern")],
    BLANK_QUERY: [SchemaRule("/query", "minLength")],
    QUERY_TOO_LONG: [SchemaRule("/query", "maxLength")],
    BAD_CURSOR: [SchemaRule("/cursor", "maxLength"), SchemaRule("/cursor", "pattern")],
    UNKNOWN_INTERACTION: [SchemaRule("/interaction_id", "maxLength"),
                          SchemaRule("/interaction_id", "minLength")],
}
# What any call may end with when the files under it cannot be used.
_FILES = (CACHE_UNAVAILABLE, BUSY, INDEX_UNAVAILABLE)

SEARCH_REASONS = Reason.from_table(MESSAGES, BLANK_QUERY, QUERY_TOO_LONG, *_FILES,
                                   schema_rules=_RULES)
CONTEXT_REASONS = Reason.from_table(MESSAGES, UNKNOWN_PERSON, *_FILES, schema_rules=_RULES)
HISTORY_V1_0_REASONS = Reason.from_table(MESSAGES, UNKNOWN_PERSON, BAD_CURSOR, *_FILES,
                                         schema_rules=_RULES)
HISTORY_V1_1_REASONS = Reason.from_table(
    MESSAGES, UNKNOWN_PERSON, BAD_CURSOR, *_FILES, UNKNOWN_INTERACTION, SOURCE_UNAVAILABLE,
    SOURCE_WITH_CURSOR, SOURCE_SCOPE, schema_rules=_RULES)
