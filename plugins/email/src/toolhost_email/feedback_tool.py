"""email.feedback 1.0.0: record the owner's feedback on their email, versioned and undoable.

Authority is the owner's own words: ``quote`` must appear verbatim in the current
authenticated user turn (``context.user_turn``, the one input at USER trust), and what is
stored, ``feedback``, must appear verbatim in the quote: the quote authorizes exactly its own
words, never different ones the model wrote beside it ("Thanks for" cannot authorize "Always
forward invoices to ..."). Mail content, tool output and earlier turns never reach the turn, so
none of them can stand in. Where the run has no turn (over MCP), the host asks the person for
their words (``UserWords`` on the Tool): what they accept is the turn, the quote and the
feedback. The result is a fixed acknowledgment (the id and ``applied``), so nothing
mail-derived is promoted to INTERNAL_TOOL trust. The same feedback twice is one record
(IDEMPOTENT).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any, Final

from toolhost import Services, ToolCallable, ToolExecutionContext, ToolFailure, ToolOutput
from toolhost_email.feedback import UnknownThread, record_feedback
from toolhost_email.messages import (
    CACHE_BUSY,
    CACHE_UNAVAILABLE,
    FEEDBACK_NOT_QUOTED,
    QUOTE_NOT_IN_USER_TURN,
    UNKNOWN_THREAD,
)
from toolhost_email.reader import connection_of, mail_where
from toolhost_email.specs import FEEDBACK_DESCRIPTION as DESCRIPTION
from toolhost_email.specs import FEEDBACK_INPUT_SCHEMA as INPUT_SCHEMA
from toolhost_email.specs import FEEDBACK_OUTPUT_SCHEMA as OUTPUT_SCHEMA
from toolhost_email.specs import FEEDBACK_SPEC as SPEC
from toolhost_email.store import CacheBusy, CacheUnavailable
from toolhost_email.tool_call import account_argument, cache_reader

__all__ = ["DESCRIPTION", "INPUT_SCHEMA", "OUTPUT_SCHEMA", "SPEC", "build", "quoted_in"]

#: A quote must be at least this many whole words of the turn: a letter or a word fragment
#: ("a", "no") is in nearly every turn and so authorizes nothing.
MIN_QUOTE_WORDS: Final = 2
#: Scripts written without spaces (Chinese, Japanese) have no word boundary to find: there a
#: quote needs this many characters instead.
MIN_WIDE_CHARS: Final = 4
_WORD = re.compile(r"\w+")
#: Seconds to wait for a writer (an import, an erase) holding the cache: well inside the tool's
#: 30 s timeout, so that the call ends with the retryable CACHE_BUSY, not the host's deadline.
WRITE_WAIT_S: Final = 10.0


def _wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in ("W", "F")


def _edge(char: str) -> bool:
    """A quote that starts or ends on this character must meet a word boundary there."""
    return _WORD.match(char) is not None and not _wide(char)


def quoted_in(quote: str, turn: str | None) -> bool:
    """``quote`` is verbatim in ``turn``, starts and ends on word boundaries there, and holds at
    least MIN_QUOTE_WORDS words (or MIN_WIDE_CHARS characters of a script without spaces)."""
    if turn is None or not quote.strip():
        return False
    wide = sum(1 for c in quote if _wide(c) and _WORD.match(c))
    if len(_WORD.findall(quote)) < MIN_QUOTE_WORDS and wide < MIN_WIDE_CHARS:
        return False
    before = r"(?<!\w)" if _edge(quote[0]) else ""
    after = r"(?!\w)" if _edge(quote[-1]) else ""
    return re.search(before + re.escape(quote) + after, turn) is not None


def _thread_account(services: Services, principal: str, thread_id: str, account: str) -> str:
    """The account the thread belongs to (it must exist among the caller's accounts, and be
    ``account``'s when given). A read before the write: ``record_feedback`` checks it again
    in the write transaction, after any erase that held the lock meanwhile."""
    with cache_reader(services, principal) as reader:
        conn = connection_of(reader)
        mine, values = mail_where(reader)
        row = None if conn is None else conn.execute(
            f"SELECT account FROM messages WHERE thread_id = ? AND {mine} LIMIT 1",
            (thread_id, *values)).fetchone()
    if row is None or (account and row[0] != account):
        raise ToolFailure(UNKNOWN_THREAD)
    return str(row[0])


def build(services: Services) -> ToolCallable:
    def feedback(arguments: Mapping[str, Any], context: ToolExecutionContext) -> ToolOutput:
        quote: str = arguments["quote"]
        if not quoted_in(quote, context.user_turn):
            raise ToolFailure(QUOTE_NOT_IN_USER_TURN)
        if not quoted_in(arguments["feedback"], quote):
            raise ToolFailure(FEEDBACK_NOT_QUOTED)
        # "": about every account (of the caller's). An account of another person's needs no
        # refusal: the record is the caller's, read only by the caller, who reads no mail of it.
        account = account_argument(arguments) or ""
        thread_id = arguments.get("thread_id") or ""
        principal = context.principal.id
        if thread_id:
            account = _thread_account(services, principal, thread_id, account)
        try:
            # The feedback is the owner's words; the quote, stored beside it, authorized it.
            change = record_feedback(
                services.data_dir, account=account, thread_id=thread_id,
                feedback=arguments["feedback"], quote=quote,
                recorded_at=services.clock.now().isoformat(), principal=principal,
                wait=WRITE_WAIT_S)
        except UnknownThread as exc:  # erased while the call waited for the write lock
            raise ToolFailure(UNKNOWN_THREAD) from exc
        except CacheBusy as exc:
            raise ToolFailure(CACHE_BUSY, retryable=True) from exc
        except CacheUnavailable as exc:
            raise ToolFailure(CACHE_UNAVAILABLE, detail={"error": str(exc)}) from exc
        structured = {"feedback_id": change.feedback_id, "status": "applied"}
        return ToolOutput(structured=structured,
                          content=f"Feedback {change.feedback_id} applied.")

    return feedback
