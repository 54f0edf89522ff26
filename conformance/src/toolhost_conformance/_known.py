"""Known failures: a check a team may fail only with a written reason.

An entry is ``CHECK`` (every case of that check) or ``CHECK[ID]`` (one case, by the id pytest
shows, e.g. ``property_run[tool=math.calculate@1.0.0]``), mapped to its reason. It turns the
check into a strict xfail: the run still fails if the check starts passing, so the entry is
deleted when the cause is fixed rather than forgotten. An entry without a reason, or naming
no check, is an error, never silently ignored.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping

__all__ = ["RENAMED", "KnownFailureError", "lookup", "parse_option", "validate"]

#: Checks renamed since an earlier release: an entry naming the old name is refused with the
#: new one (never silently mapped: the reason was written for what the old check asserted).
RENAMED = {"reason_codes_have_messages": "reasons"}

_KEY = re.compile(r"^(?:test_)?(?P<check>[a-z][a-z0-9_]*)(?:\[(?P<case>[^\[\]]+)\])?$")


class KnownFailureError(ValueError):
    """A known-failure entry the suite refuses (no reason, or no such check)."""


def validate(entries: Mapping[str, object], checks: Collection[str], where: str) -> dict[str, str]:
    """Check every entry and return them keyed canonically (``check`` / ``check[case]``).

    :param entries: ``{key: reason}`` as written by the team.
    :param checks: the check names that exist.
    :param where: where the entries came from, for the error message.
    :raises KnownFailureError: for a reason-less entry or an unknown check.
    """
    result: dict[str, str] = {}
    for key, reason in entries.items():
        match = _KEY.match(key) if isinstance(key, str) else None
        if match is not None and match["check"] in RENAMED:
            raise KnownFailureError(
                f"known failure {key!r} in {where} names the check {match['check']}, which is "
                f"now {RENAMED[match['check']]} (it reports registration's reasons check); "
                f"rename the entry"
            )
        if match is None or match["check"] not in checks:
            raise KnownFailureError(
                f"known failure {key!r} in {where} names no check; use one of "
                f"{', '.join(sorted(checks))}, optionally with [case id]"
            )
        if not isinstance(reason, str) or not reason.strip():
            raise KnownFailureError(
                f"known failure {key!r} in {where} has no reason; a check may be allowed to "
                f"fail only with a written reason (e.g. {{{key!r}: 'upstream issue #12'}})"
            )
        canonical = match["check"] + (f"[{match['case']}]" if match["case"] else "")
        result[canonical] = reason.strip()
    return result


def parse_option(values: Iterable[str]) -> dict[str, str]:
    """``--toolhost-known-failure CHECK=REASON`` values as ``{CHECK: REASON}``.

    A value with no ``=`` has no reason: it maps to ``""`` so that :func:`validate` refuses it.
    """
    entries: dict[str, str] = {}
    for value in values:
        key, _, reason = value.partition("=")
        entries[key.strip()] = reason
    return entries


def lookup(entries: Mapping[str, str], check: str, case: str | None) -> str | None:
    """The reason a case is a known failure (the case's own entry first), or None."""
    if case is not None and f"{check}[{case}]" in entries:
        return entries[f"{check}[{case}]"]
    return entries.get(check)
