"""The owner's server's Authentication-Results, as the cache keeps it, gives a verdict only when
it was kept whole and as the server wrote it.

The server writes one ``dkim=pass`` resinfo per DKIM signature the sender chose to add, before
its spf= and dmarc= results, so a sender decides where a header cut at the stored bound ends:
after the signatures, hiding ``spf=fail ... dmarc=fail`` (a spoofed "From: owner" became a
writing example, D166), or inside ``header.d=lists.example.org.attacker.example`` (a DKIM pass
for the bank's list, whose one-click evidence the attacker's URL then became, D160). And an
RFC 2047 encoded word in a quoted ``smtp.mailfrom`` was decoded, closing the quotes and writing
a ``dkim=pass`` of the sender's own (D159). Each through the real import and the real tools.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from email_support import AUTHSERV, MODE, UNSUBSCRIBE, cache_dir, harness, ok
from mail_support import OWNER
from toolhost_email import open_mail_cache
from toolhost_email.census import census
from toolhost_email.importer import import_path
from toolhost_email.parse import MAX_HEADER_CHARS

#: Where the stored value is cut (the stored headers' bound, which Authentication-Results has).
CUT = MAX_HEADER_CHARS
CENSUS = {**UNSUBSCRIBE, "TOOLHOST_EMAIL_AUTHSERV_ID": AUTHSERV}
CONTEXT = {**MODE, "TOOLHOST_EMAIL_AUTHSERV_ID": AUTHSERV}
BANK = "Bank News <news@lists.example.org>"
BANK_LIST = "List-Id: Bank news <weekly.lists.example.org>\n"
BANK_URL = "https://unsub.lists.example.org/u/1"
ATTACKER_URL = "https://collect.attacker.example/u"


def _signatures(room: int) -> str:
    """The attacker's own DKIM passes, as the owner's server records them, up to ``room``
    characters."""
    out, i = "", 0
    while len(out) + 80 < room:
        out += f" dkim=pass header.d=s{i:03d}.attacker.example header.s=sel header.b=AbCdEfGh;"
        i += 1
    return out


def _past_the_cut(tail: str) -> str:
    """The owner's server's header, with ``tail`` (its spf= and dmarc= results) starting past
    the cut."""
    value = f"{AUTHSERV};" + _signatures(CUT - 200)
    value += " dkim=pass header.d=pad.attacker.example header.s=" + "x" * 250 + ";"
    assert len(value) > CUT
    return value + tail


def _cut_inside_signer(domain: str) -> str:
    """The owner's server's header whose cut leaves ``header.d=DOMAIN`` of the attacker's
    ``DOMAIN.attacker.example``."""
    value = f"{AUTHSERV};" + _signatures(CUT - 200)
    prefix, middle = " dkim=pass header.s=", " header.d="
    selector = CUT - len(value) - len(prefix) - len(middle) - len(domain)
    value += f"{prefix}{'x' * selector}{middle}{domain}.attacker.example;"
    assert value[:CUT].endswith(f"header.d={domain}")
    return value + " spf=pass smtp.mailfrom=attacker.example"


def _message(sender: str, subject: str, auth: str, extra: str = "",
             date: str = "Tue, 01 Dec 2026 10:00:00 +0000") -> str:
    return (f"From attacker@attacker.example Tue Dec  1 10:00:00 2026\n"
            f"Authentication-Results: {auth}\nFrom: {sender}\nTo: {OWNER}\n"
            f"Subject: {subject}\nMessage-ID: <{subject.replace(' ', '')}@example.org>\n"
            f"Date: {date}\n{extra}\n{subject}.\n\n")


def _bank_list(url: str) -> str:
    return (f"{BANK_LIST}List-Unsubscribe: <{url}>\n"
            "List-Unsubscribe-Post: List-Unsubscribe=One-Click\n")


def _import(tmp_path: Path, *messages: str) -> Path:
    root = tmp_path / "data"
    box = tmp_path / "in.mbox"
    box.write_text("".join(messages))
    import_path(cache_dir(root), OWNER, box)
    return root


def _subscriptions(root: Path) -> list[dict[str, Any]]:
    with harness(root, CENSUS) as h:
        return list(ok(h.invoke("email.subscriptions"))["subscriptions"])


def _destinations(root: Path) -> list[str | None]:
    with open_mail_cache(cache_dir(root)) as cache:
        return [s.destination for s in census(cache, AUTHSERV)]


def test_spoofed_own_mail_whose_failures_are_past_the_cut_is_no_writing_example(
    tmp_path: Path,
) -> None:
    auth = _past_the_cut(" spf=fail smtp.mailfrom=attacker.example; "
                         "dmarc=fail header.from=example.com")
    root = _import(tmp_path, _message(f"Owner <{OWNER}>", "Note to self", auth))
    with harness(root, CONTEXT) as h:
        assert ok(h.invoke("email.context"))["writing_examples"] == []


def test_own_mail_with_a_whole_header_is_still_a_writing_example(tmp_path: Path) -> None:
    auth = f"{AUTHSERV};" + _signatures(CUT - 400) + " dkim=pass header.d=example.com"
    root = _import(tmp_path, _message(f"Owner <{OWNER}>", "Note to self", auth))
    with harness(root, CONTEXT) as h:
        examples = ok(h.invoke("email.context"))["writing_examples"]
    assert [e["subject"] for e in examples] == ["Note to self"]


def test_a_cut_inside_a_signers_domain_is_no_dkim_pass_for_the_list(tmp_path: Path) -> None:
    root = _import(tmp_path, _message(BANK, "This week", _cut_inside_signer("lists.example.org"),
                                      _bank_list(ATTACKER_URL)))
    assert [s["one_click"] for s in _subscriptions(root)] == [False]


def test_a_cut_header_does_not_displace_the_lists_genuine_evidence(tmp_path: Path) -> None:
    genuine = _message(BANK, "Last week", f"{AUTHSERV}; dkim=pass header.d=lists.example.org "
                       "header.s=s1; spf=pass", _bank_list(BANK_URL),
                       date="Tue, 01 Dec 2026 09:00:00 +0000")
    forged = _message(BANK, "This week", _cut_inside_signer("lists.example.org"),
                      _bank_list(ATTACKER_URL))
    root = _import(tmp_path, genuine, forged)
    assert [s["one_click"] for s in _subscriptions(root)] == [True]
    assert _destinations(root) == [BANK_URL]


def test_a_forged_header_below_a_cut_one_is_not_read_instead(tmp_path: Path) -> None:
    # The header further down arrived with the mail: a cut topmost one is no verdict, not
    # absent.
    forged_below = f"{AUTHSERV}; dkim=pass header.d=lists.example.org header.s=s1"
    message = _message(BANK, "This week", _cut_inside_signer("other.example"),
                       f"Authentication-Results: {forged_below}\n{_bank_list(ATTACKER_URL)}")
    root = _import(tmp_path, message)
    assert [s["one_click"] for s in _subscriptions(root)] == [False]


def test_an_encoded_word_in_a_quoted_mailfrom_writes_no_dkim_pass(tmp_path: Path) -> None:
    # The server echoes the envelope sender the attacker gave: a quoted local part holding an
    # encoded word whose text is '" "; dkim=pass header.d=lists.example.org; x=" "'.
    mailfrom = ('" =?us-ascii?q?=22;_dkim=3Dpass_header.d=3Dlists.example.org;_x=3D=22?= "'
                "@attacker.example")
    auth = f"{AUTHSERV}; spf=pass smtp.mailfrom={mailfrom}"
    root = _import(tmp_path, _message(BANK, "This week", auth, _bank_list(ATTACKER_URL)))
    assert [s["one_click"] for s in _subscriptions(root)] == [False]
    with open_mail_cache(cache_dir(root)) as cache:
        (message,) = cache.messages()
        source = cache.source(message.message_key)
    # The stored headers (what a reader shows) still read it decoded, as before.
    assert source is not None
    assert ("Authentication-Results", f'{AUTHSERV}; spf=pass smtp.mailfrom=" "; dkim=pass '
            'header.d=lists.example.org; x=" "@attacker.example') in source.headers


def test_a_long_whole_header_of_the_list_still_passes(tmp_path: Path) -> None:
    auth = (f"{AUTHSERV};" + _signatures(CUT - 300)
            + " dkim=pass header.d=lists.example.org header.s=s1; spf=pass")
    assert len(auth) < CUT
    root = _import(tmp_path, _message(BANK, "This week", auth, _bank_list(BANK_URL)))
    assert [s["one_click"] for s in _subscriptions(root)] == [True]
