"""email.context 1.0.0: the owner's cached thread, inbox rows and writing examples (their own
sent mail), each in its source wrapper, plus the owner feedback in force. Reads the cache only:
no network, no model. EXTERNAL_UNTRUSTED: every string here came from mail.

Every field is bounded (the output schema states each bound), and a result that pathological
mail would still push over maximum_output_bytes leaves out its last inbox rows, then its last
writing examples, then its oldest thread messages, rather than lose the whole result.
A sent message is a writing example only when the owner's own server (the configured
authserv-id) did not record that its From was spoofed (dmarc=fail, or spf failing without a
DKIM pass for the account's domain): the From header alone is the sender's claim.
"Latest" is D160's: a Date more than a day past the clock ranks below every plausible one
(undated mail stays last), so mail with a forged future date cannot hold the inbox."""

from __future__ import annotations

import datetime as _dt
import json
import sqlite3
from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any, Final

from toolhost import Services, ToolCallable, ToolExecutionContext, ToolFailure, ToolOutput
from toolhost_email import latest, wire
from toolhost_email.authres import spoofed_from
from toolhost_email.config import AUTHSERV_SETTING
from toolhost_email.feedback import applied_feedback
from toolhost_email.messages import UNKNOWN_THREAD
from toolhost_email.reader import MailCacheReader, connection_of, mail_where, message_from_row
from toolhost_email.specs import CONTEXT_DESCRIPTION as DESCRIPTION
from toolhost_email.specs import CONTEXT_INPUT_SCHEMA as INPUT_SCHEMA
from toolhost_email.specs import CONTEXT_OUTPUT_SCHEMA as OUTPUT_SCHEMA
from toolhost_email.specs import CONTEXT_SPEC as SPEC
from toolhost_email.specs import FEEDBACK_MAX, SNIPPET_CHARS, TEXT_CHARS, THREAD_MAX
from toolhost_email.tool_call import account_argument, cache_reader, json_output

__all__ = ["DESCRIPTION", "FEEDBACK_MAX", "INPUT_SCHEMA", "OUTPUT_SCHEMA", "SNIPPET_CHARS",
           "SPEC", "TEXT_CHARS", "THREAD_MAX", "build"]

_COLUMNS = ("message_key, account, thread_id, message_id, date_ts, subject, sender, to_addrs, "
            "cc_addrs, reply_to, direction, body, auth_results")
#: Latest first (``latest.rank``'s order, reversed), one query per rank, each with or without
#: the horizon as its parameter: one sort key over an expression read every row, a rank reads
#: the date index in order and stops at the rows asked for.
_RANKS: Final = (("date_ts <= ?", True), ("date_ts > ?", True), ("date_ts IS NULL", False))


def _latest(conn: sqlite3.Connection, where: str, params: tuple[object, ...],
            horizon: int) -> Iterator[tuple[Any, ...]]:
    """The rows ``where`` keeps, latest first, read only as far as the caller reads."""
    for rank, dated in _RANKS:
        yield from conn.execute(
            f"SELECT {_COLUMNS} FROM messages WHERE {where} AND {rank} "
            "ORDER BY date_ts DESC, message_key DESC", (*params, horizon) if dated else params)


def _rows(conn: sqlite3.Connection, where: str, params: tuple[object, ...],
          limit: int, horizon: int) -> list[tuple[Any, ...]]:
    return list(islice(_latest(conn, where, params, horizon), max(limit, 0)))


def _own_mail(conn: sqlite3.Connection, where: str, params: tuple[object, ...], limit: int,
              horizon: int, authserv_id: str | None) -> list[tuple[Any, ...]]:
    """The latest ``limit`` sent rows the owner's server did not record as spoofed."""
    found: list[tuple[Any, ...]] = []
    if limit <= 0:
        return found
    for row in _latest(conn, where, params, horizon):
        if not spoofed_from(json.loads(row[12] or "[]"), authserv_id,
                            str(row[1]).rpartition("@")[2]):
            found.append(row)
            if len(found) >= limit:
                break
    return found


def _size(value: object) -> int:
    return len(wire.render(value).encode())


def _fit(out: dict[str, Any], budget: int) -> None:
    """Leave items out (last inbox rows, last examples, oldest thread messages) until the
    rendered result is within ``budget``; only pathological mail needs it."""
    excess = _size(out) - budget
    for field, index in (("inbox", -1), ("writing_examples", -1), ("thread", 0)):
        items: list[Any] = out[field]
        while excess > 0 and items:
            # With its ", ", but a list's last item has none: counted anyway, the result
            # stayed a byte over and the host withheld all of it.
            excess -= _size(items.pop(index)) + (2 if items else 0)


def _scoped(reader: MailCacheReader, where: str,
            account: str | None) -> tuple[str, tuple[object, ...]]:
    """``where`` among the caller's accounts (of ``account`` when given): another person's
    account reads as one with no mail, another person's thread as no thread."""
    mine, values = mail_where(reader)
    if account is None:
        return f"{where} AND {mine}", values
    return f"{where} AND {mine} AND account = ?", (*values, account)


def _context(reader: MailCacheReader, arguments: Mapping[str, Any],
             authserv_id: str | None, now: _dt.datetime) -> dict[str, Any]:
    account = account_argument(arguments)
    horizon = latest.horizon(now)
    thread_id = arguments.get("thread_id")
    out: dict[str, Any] = {"thread": [], "inbox": [], "writing_examples": [], "feedback": []}
    conn = connection_of(reader)
    if conn is None:
        if thread_id is not None:
            raise ToolFailure(UNKNOWN_THREAD)
        return out
    if thread_id is not None:
        where, params = _scoped(reader, "thread_id = ?", account)
        rows = _rows(conn, where, (thread_id, *params), THREAD_MAX, horizon)
        if not rows:
            raise ToolFailure(UNKNOWN_THREAD)
        for row in reversed(rows):
            m = message_from_row(row)
            text, cut = wire.bounded(row[11], TEXT_CHARS)
            out["thread"].append({
                "source": wire.source(m.account, m.thread_id, m.message_key),
                "date": wire.iso(m.date), "subject": m.subject[:wire.SUBJECT_CHARS],
                "from": wire.addresses(m.sender), "to": wire.addresses(m.to),
                "text": text, "text_truncated": cut})
    where, params = _scoped(reader, "direction = 'received'", account)
    for row in _rows(conn, where, params, arguments.get("inbox_limit", 10), horizon):
        m = message_from_row(row)
        out["inbox"].append({
            "source": wire.source(m.account, m.thread_id, m.message_key),
            "date": wire.iso(m.date), "subject": m.subject[:wire.SUBJECT_CHARS],
            "from": wire.addresses(m.sender),
            "snippet": " ".join(row[11].split())[:SNIPPET_CHARS]})
    where, params = _scoped(reader, "direction = 'sent'", account)
    for row in _own_mail(conn, where, params, arguments.get("examples_limit", 3), horizon,
                         authserv_id):
        m = message_from_row(row)
        text, cut = wire.bounded(row[11], TEXT_CHARS)
        out["writing_examples"].append({
            "source": wire.source(m.account, m.thread_id, m.message_key),
            "date": wire.iso(m.date), "subject": m.subject[:wire.SUBJECT_CHARS],
            "to": wire.addresses(m.to),
            "text": text, "text_truncated": cut})
    for feedback_id, f_account, f_thread, feedback in applied_feedback(
            reader, account, thread_id, FEEDBACK_MAX):
        out["feedback"].append({"feedback_id": feedback_id, "account": f_account,
                                "thread_id": f_thread, "feedback": feedback})
    _fit(out, SPEC.maximum_output_bytes)
    return out


def build(services: Services) -> ToolCallable:
    authserv_id = services.settings.get(AUTHSERV_SETTING)

    def context(arguments: Mapping[str, Any], call: ToolExecutionContext) -> ToolOutput:
        with cache_reader(services, call.principal.id) as reader:
            structured = _context(reader, arguments, authserv_id, services.clock.now())
        return json_output(structured)

    return context



