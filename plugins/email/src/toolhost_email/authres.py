"""Authentication-Results (RFC 8601), read for the owner's own receiving server's verdicts: did
it record a DKIM pass for the sender's domain, or a DMARC/SPF failure?

Only a header whose authserv-id is the one the operator configured
(``TOOLHOST_EMAIL_AUTHSERV_ID``) counts, and of those only the topmost: the receiving server
prepends its own, so anything further down arrived with the message and may be forged.

The header is tokenized as RFC 8601 §2.2 writes it (quoted strings, nested comments with
quoted pairs), because its property values echo sender-chosen text (``smtp.mailfrom`` may be a
quoted local part holding ``;`` and ``dkim=pass``): splitting on raw ``;`` would let that text
become a result of its own.

A header is stored cut to ``MAX_STORED_CHARS``; the owner's server writes one resinfo per DKIM
signature the sender chose to add, so the sender decides where a cut falls (inside a
``header.d``, before a ``dmarc=fail``). A header that long gives no verdict: no DKIM pass,
and not the owner's own writing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import attrs

__all__ = ["MAX_STORED_CHARS", "Result", "dkim_pass_for", "results_for", "spoofed_from"]

#: An Authentication-Results value is stored cut to this many characters: one that long was
#: (or may have been) cut, and what it says is unknown.
MAX_STORED_CHARS: Final = 4000

_SPECIALS = frozenset(';="()')


@attrs.frozen
class Result:
    """One resinfo: ``method=result`` and its ``ptype.property=value`` pairs (lower-cased names;
    values unquoted, domains lower-cased by the caller as needed)."""

    method: str
    result: str
    props: tuple[tuple[str, str], ...]

    def values(self, name: str) -> list[str]:
        return [v for n, v in self.props if n == name]


def _tokens(header: str) -> list[str]:
    """Words, ``;`` and ``=`` of ``header``, comments dropped (as white space), quoted strings
    unquoted and glued to adjacent text (``"a b"@c`` is one word). Unbalanced input ends the
    word or comment where the header ends."""
    out: list[str] = []
    word: list[str] | None = None
    i, n = 0, len(header)
    while i < n:
        c = header[i]
        if c == "(":
            depth, i = 1, i + 1
            while i < n and depth:
                if header[i] == "\\":
                    i += 1
                elif header[i] == "(":
                    depth += 1
                elif header[i] == ")":
                    depth -= 1
                i += 1
            if word is not None:
                out.append("".join(word))
                word = None
            continue
        if c == '"':
            i += 1
            word = word if word is not None else []
            while i < n and header[i] != '"':
                if header[i] == "\\" and i + 1 < n:
                    i += 1
                word.append(header[i])
                i += 1
            i += 1
            continue
        if c.isspace() or c in _SPECIALS:
            if word is not None:
                out.append("".join(word))
                word = None
            if c in ";=":
                out.append(c)
            i += 1
            continue
        word = word if word is not None else []
        word.append(c)
        i += 1
    if word is not None:
        out.append("".join(word))
    return out


def _parse(header: str) -> tuple[str, list[Result]]:
    """(authserv-id lower-cased, the resinfos). A resinfo that is no ``method=result`` is
    skipped, never guessed at."""
    groups: list[list[str]] = [[]]
    for token in _tokens(header):
        if token == ";":
            groups.append([])
        else:
            groups[-1].append(token)
    first = groups[0]
    authserv_id = first[0].lower() if first else ""
    results: list[Result] = []
    for group in groups[1:]:
        if len(group) < 3 or group[1] != "=":
            continue
        method = group[0].lower().split("/", 1)[0]
        props: list[tuple[str, str]] = []
        rest = group[3:]
        k = 0
        while k + 2 < len(rest):
            if rest[k + 1] == "=" and rest[k] != "=" and rest[k + 2] != "=":
                props.append((rest[k].lower(), rest[k + 2]))
                k += 3
            else:
                k += 1
        results.append(Result(method=method, result=group[2].lower(), props=tuple(props)))
    return authserv_id, results


def _topmost(headers: Sequence[str], authserv_id: str | None) -> str | None:
    """The topmost header (of ``headers``, in message order) whose authserv-id is
    ``authserv_id``; None without one (or without an authserv-id configured)."""
    if not authserv_id:
        return None
    wanted = authserv_id.strip().lower()
    for header in headers:
        if _parse(header)[0] == wanted:
            return header
    return None


def _cut(header: str) -> bool:
    return len(header) >= MAX_STORED_CHARS


def results_for(headers: Sequence[str], authserv_id: str | None) -> list[Result] | None:
    """The resinfos of the topmost header (of ``headers``, in message order) whose authserv-id
    is ``authserv_id``; None without one (or without an authserv-id configured), and when that
    header was cut where it was stored: a header further down arrived with the mail, and part
    of one says nothing of the rest."""
    header = _topmost(headers, authserv_id)
    return None if header is None or _cut(header) else _parse(header)[1]


def _domain(value: str) -> str:
    return value.rsplit("@", 1)[-1].strip().lower()


def dkim_pass_for(headers: Sequence[str], authserv_id: str | None, domain: str) -> bool:
    """True when the topmost Authentication-Results of ``authserv_id`` records dkim=pass with
    ``header.d`` (or ``header.i``'s domain) exactly ``domain``. False without an authserv-id."""
    results = results_for(headers, authserv_id)
    if not results or not domain:
        return False
    domain = domain.lower()
    for r in results:
        if r.method != "dkim" or r.result != "pass":
            continue
        signers = [v.lower() for v in r.values("header.d")]
        signers += [_domain(v) for v in r.values("header.i") if "@" in v]
        if domain in signers:
            return True
    return False


def spoofed_from(headers: Sequence[str], authserv_id: str | None, domain: str) -> bool:
    """True when the owner's own server recorded that this mail's From ``domain`` was not the
    sender's to use: dmarc=fail, or an SPF fail/softfail with no DKIM pass for ``domain``; and
    when what it recorded is unknown, its header cut where it was stored (a failure may have
    been cut off)."""
    header = _topmost(headers, authserv_id)
    if header is not None and _cut(header):
        return True
    results = results_for(headers, authserv_id)
    if not results:
        return False
    if any(r.method == "dmarc" and r.result == "fail" for r in results):
        return True
    spf_failed = any(r.method == "spf" and r.result in ("fail", "softfail") for r in results)
    return spf_failed and not dkim_pass_for(headers, authserv_id, domain)
