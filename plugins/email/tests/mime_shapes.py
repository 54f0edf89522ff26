"""Messages of many MIME shapes, well-formed and not, for the tests that hold ``split``'s
reading of a message equal to the standard parser's: written with the standard library, written
by hand the ways other mail software writes them, and both mutated line by line."""

from __future__ import annotations

import random
from collections.abc import Iterator
from email.message import EmailMessage

from mail_support import mail

__all__ = ["BOUNDARIES", "CONTENT_TYPES", "HAND_WRITTEN", "library_written", "mutated",
           "shapes"]

#: Boundaries as mail software writes them, and ones that test the edges of the plain form.
BOUNDARIES = (
    '"===============1234567890123456789=="', "000000000000a1b2c3d4e5f6", '"----=_Part_1_2.3"',
    '"Apple-Mail=_6C1F8A3E-0B2B-4B4E-9C51-0123456789AB"', '"_004_AM0PR01MB_"', "b1.2+3_4-5",
    '"(paren)+plus,comma/slash:colon=eq\'q"', '"b"', "b", '"=?utf-8?q?x?="', '"with space"',
    '"trailing "', "'quoted'", '"back\\\\slash"', '"semi;colon"', "", '""', '"a"b',
)
#: Content-Type values a multipart may carry, with {b} for its boundary.
CONTENT_TYPES = (
    "multipart/alternative; boundary={b}", "multipart/mixed;\n boundary={b}",
    "multipart/mixed;\n\tboundary={b}", "Multipart/Alternative; Boundary={b}",
    "multipart/alternative; charset=utf-8; boundary={b}",
    "multipart/alternative; boundary={b}; charset=utf-8", "multipart/alternative;boundary={b}",
    "multipart/alternative; boundary={b} ", "multipart/alternative ; boundary={b}",
    "multipart/alternative; boundary={b}; boundary=other", "multipart/alternative; boundary*={b}",
    "multipart/alternative; boundary*0={b}", "multipart/alternative; (note) boundary={b}",
    "multipart/related; type=\"text/html\"; boundary={b}", "multipart/digest; boundary={b}",
    "multipart/report; report-type=delivery-status; boundary={b}", "multipart/alternative",
    "multipart/x-mixed-replace; boundary={b}", "multipart/alternative; boundary={b};",
)

_PLAIN = "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n"
_HEAD = ("From: Alice <alice@example.org>\nTo: owner@example.com\nSubject: hi\n"
         "Message-ID: <h1@example.org>\nDate: Tue, 01 Dec 2026 10:00:00 +0000\n")


def _multipart(ctype: str, boundary: str, parts: list[str], *, preamble: str = "",
               epilogue: str = "", close: bool = True) -> str:
    b = boundary.strip('"')
    body = preamble + "".join(f"--{b}\n{part}\n" for part in parts)
    return (f"{_HEAD}MIME-Version: 1.0\nContent-Type: {ctype.format(b=boundary)}\n\n{body}"
            + (f"--{b}--\n{epilogue}" if close else ""))


#: Mail written by hand the ways mail software writes it, including what the standard parser
#: reads with defects (the fast reading must leave those to it).
HAND_WRITTEN: tuple[str, ...] = (
    _HEAD + "\nOne plain body.\n",
    _HEAD + _PLAIN + "Grüße, plain.\n",
    _HEAD + "Content-Type: text/html; charset=\"us-ascii\"\n\n<p>Only <b>HTML</b></p>\n",
    _HEAD + "Content-Type: text/plain; charset=x-unknown\n\nplain words\n",
    _HEAD + "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n"
    "R3LDvMOfZQ=\n",
    _HEAD + "Content-Type: TEXT/PLAIN; CHARSET=ISO-8859-1\nContent-Transfer-Encoding: "
    "Quoted-Printable\n\nGr=FC=DFe=\n soft\n",
    _HEAD + "Content-Type: text/plain; format=flowed; delsp=yes\n\nflowed \ntext\n",
    _HEAD + "Content-Type: application/pdf; name=\"a.pdf\"\nContent-Disposition: attachment\n\n"
    "%PDF\n",
    _HEAD + "Content-Type: text/plain\nContent-Disposition: attachment; filename=\"a.txt\"\n\n"
    "an attached text\n",
    _HEAD + "Content-Type: text/plain\nContent-Disposition: inline\n\ninline text\n",
    _HEAD + "Content-Type: text/plain (a comment)\n\ncommented type\n",
    _HEAD + "Content-Type: text\n\nno subtype\n",
    _HEAD + "Content-Type: \n\nempty type\n",
    _HEAD + "Content-Type: text/plain\nContent-Type: text/html\n\n<p>two types</p>\n",
    _HEAD + "Content-Type: message/rfc822\n\n" + _HEAD + "\ninner body\n",
    _HEAD + "Content-Type: message/delivery-status\n\nReporting-MTA: dns; x\n\nAction: failed\n",
    _HEAD,
    _HEAD.rstrip("\n"),
    _HEAD + "\n",
    "\nno header section\n",
    "From someone Tue Dec  1 10:00:00 2026\n" + _HEAD + "\nenvelope line first\n",
    _HEAD + "From someone Tue Dec  1 10:00:00 2026\n\nenvelope line last\n",
    _HEAD + "From someone Tue Dec  1 10:00:00 2026\nX-After: 1\n\nenvelope line inside\n",
    " continuation first\n" + _HEAD + "\nbody\n",
    _HEAD + ": no name\n\nbody\n",
    _HEAD + "Bad Name: space in the name\n\nbody\n",
    _HEAD + "no colon at all\n\nbody\n",
    _HEAD + "X-Empty:\nX-Blank: \nX-Folded:\n\tcontinued\nX-Spaces:   \n  more\n\nbody\n",
    _HEAD + "X-Folded: one\n two\n\tthree\n \n\nwhitespace line in the header section\n",
    _HEAD + "X-Trailing: value  \t\n\nbody\n",
    _HEAD.replace("\n", "\r\n") + "\r\nCRLF mail\r\n",
    _HEAD + "X-CR: a\rb\n\nbare CR\n",
    _HEAD + "\nno newline at the end",
    _HEAD + "Subject: =?utf-8?q?second_subject?=\n\nbody\n",
    _multipart("multipart/alternative; boundary={b}", '"abc"', [_PLAIN + "plain\n",
               "Content-Type: text/html\n\n<p>html</p>\n"]),
    _multipart("multipart/alternative; boundary={b}", '"abc"',
               ["Content-Type: text/html\n\n<p>html first</p>\n", _PLAIN + "plain second\n"]),
    _multipart("multipart/mixed; boundary={b}", "abc",
               [_PLAIN + "body\n", "Content-Type: application/octet-stream\n"
                "Content-Disposition: attachment; filename=\"x.bin\"\n"
                "Content-Transfer-Encoding: base64\n\nAAEC\n"],
               preamble="This is a preamble.\n", epilogue="An epilogue.\n"),
    _multipart("multipart/mixed; boundary={b}", "abc",
               ["Content-Type: text/plain\nContent-Disposition: attachment\n\nattached\n",
                "Content-Type: text/html\n\n<p>the body</p>\n"]),
    _multipart("multipart/mixed; boundary={b}", "outer",
               ["Content-Type: multipart/alternative; boundary=inner\n\n--inner\n" + _PLAIN
                + "nested plain\n--inner\nContent-Type: text/html\n\n<p>nested</p>\n"
                "--inner--\n", "Content-Type: image/png\n\nPNG\n"]),
    _multipart("multipart/mixed; boundary={b}", "outer",
               ["Content-Type: multipart/alternative; boundary=outer-inner\n\n--outer-inner\n"
                + _PLAIN + "prefix boundary\n--outer-inner--\n"]),
    _multipart("multipart/mixed; boundary={b}", "outer",
               ["Content-Type: multipart/alternative; boundary=inner\n\n--inner\n" + _PLAIN
                + "never closed\n"]),
    _multipart("multipart/related; boundary={b}; start=\"<b@x>\"", "rel",
               ["Content-Type: image/png\nContent-ID: <a@x>\n\nPNG\n",
                "Content-Type: text/html\nContent-ID: <b@x>\n\n<p>start part</p>\n"]),
    _multipart("multipart/alternative; boundary={b}", "abc", [_PLAIN + "unclosed\n"],
               close=False),
    _HEAD + "Content-Type: multipart/alternative; boundary=abc\n\nno boundary line at all\n",
    _HEAD + "Content-Type: multipart/alternative; boundary=abc\n\n--abc--\nclosed at once\n",
    _HEAD + "Content-Type: multipart/alternative; boundary=abc\n\n--abc\n--abc\n" + _PLAIN
    + "after a double boundary\n--abc--\n",
    _HEAD + "Content-Type: multipart/alternative; boundary=abc\n\n--abc\n\nno part headers\n"
    "--abc\n\n--abc--\n",
    _HEAD + "Content-Type: multipart/alternative; boundary=abc\n\n--abc\nContent-Type: "
    "text/plain\n--abc--\n",
    _HEAD + "Content-Type: multipart/alternative; boundary=abc\n\n--abc\nbody without "
    "headers\n--abc--\n",
    _HEAD + "Content-Type: multipart/alternative; boundary=abc\n\n--abc  \n" + _PLAIN
    + "boundary with blanks\n--abc-- \t\n",
    _HEAD + "Content-Type: multipart/alternative; boundary=abc\n\n--abc\n" + _PLAIN
    + "--abcd\n--abc-x\n-- abc\n --abc\nlookalikes\n--abc--",
    _HEAD + "Content-Type: multipart/alternative; boundary=abc\n\n--abc\n" + _PLAIN
    + "trailing newlines\n\n\n--abc--\n\n",
    _HEAD + "Content-Type: multipart/alternative; boundary=abc\n\n--abc\n" + _PLAIN
    + "\n--abc--\n",
    _HEAD + "Content-Type: multipart/alternative; boundary=abc\nContent-Transfer-Encoding: "
    "base64\n\n--abc\n" + _PLAIN + "bad multipart encoding\n--abc--\n",
    _HEAD + "Content-Type: multipart/mixed; boundary=abc\n\n--abc\nContent-Type: "
    "message/rfc822\n\n" + _HEAD + "\nforwarded\n--abc--\n",
)


def library_written() -> Iterator[EmailMessage]:
    """Mail as the standard library writes it: alternatives, attachments, related parts,
    charsets and transfer encodings, nested and forwarded messages (their boundaries fixed,
    not random, so that the same seed makes the same bytes)."""
    for number, message in enumerate(_library_written()):
        for index, part in enumerate(message.walk()):
            if part.is_multipart():
                part.set_boundary(f"=_{number}.{index}_")
        yield message


def _library_written() -> Iterator[EmailMessage]:
    yield mail()
    yield mail(body="Grüße\n" * 3, html="<p>Grüße</p>")
    yield mail(subject="=?utf-8?b?R3LDvMOfZQ==?= and =?iso-8859-1?q?Gr=FC=DFe?=",
               sender="=?utf-8?q?Zo=C3=AB?= <zoe@example.org>", body="x" * 2000 + "\n")
    html = mail()
    html.set_content("<html><p>only html</p></html>", subtype="html")
    yield html
    for cte in ("7bit", "8bit", "quoted-printable", "base64"):
        m = mail()
        m.set_content("Grüße " * 30 if cte != "7bit" else "plain " * 30, cte=cte)
        yield m
    latin = mail()
    latin.set_content("Grüße\n", charset="iso-8859-1", cte="quoted-printable")
    yield latin
    attached = mail(html="<p>with attachment</p>")
    attached.add_attachment(b"\x00\x01" * 100, maintype="application", subtype="octet-stream",
                            filename="data.bin")
    attached.add_attachment("attached words\n", filename="notes.txt")
    yield attached
    related = mail(html="<p><img src='cid:img'></p>")
    html_part = list(related.iter_parts())[1]
    assert isinstance(html_part, EmailMessage)
    html_part.add_related(b"PNG", maintype="image", subtype="png", cid="<img>")
    yield related
    forwarded = mail(body="see below\n")
    forwarded.add_attachment(mail(subject="inner", body="inner body\n"))
    yield forwarded
    mixed_first = EmailMessage()
    for name, value in mail().items():
        if not name.lower().startswith("content-"):
            mixed_first[name] = value
    mixed_first.add_attachment("attachment before any body\n", filename="a.txt")
    yield mixed_first
    long_headers = mail(subject="word " * 200, headers={"References": " ".join(
        f"<r{i}@example.org>" for i in range(60)), "X-Long": "y" * 3000})
    yield long_headers


def mutated(raw: bytes, rng: random.Random) -> bytes:
    """``raw`` with one line-level change of the kinds mail software and transports make."""
    lines = raw.split(b"\n")
    at = rng.randrange(len(lines))
    change = rng.randrange(9)
    if change == 0:
        lines.insert(at, lines[at])
    elif change == 1:
        del lines[at]
    elif change == 2:
        lines.insert(at, b"")
    elif change == 3:
        lines[at] = b" " + lines[at]
    elif change == 4:
        lines[at] += b"\r"
    elif change == 5:
        return raw[:rng.randrange(len(raw) + 1)]
    elif change == 6:
        lines[at] = lines[at].upper()
    elif change == 7:
        lines[at] += b" \t"
    else:
        lines[at] = lines[at][:rng.randrange(len(lines[at]) + 1)]
    return b"\n".join(lines)


def shapes(mutations: int, seed: int = 7) -> Iterator[bytes]:
    """Every message above, each boundary in each multipart Content-Type, then ``mutations``
    mutated copies of them, the same ones for the same seed."""
    base = [m.as_bytes() for m in library_written()]
    base += [text.encode("utf-8", "surrogateescape") for text in HAND_WRITTEN]
    base += [_multipart(ctype, boundary, [_PLAIN + "plain\n", "Content-Type: text/html\n\n"
                                         "<p>html</p>\n"]).encode()
             for ctype in CONTENT_TYPES for boundary in BOUNDARIES]
    yield from base
    rng = random.Random(seed)
    for _ in range(mutations):
        yield mutated(rng.choice(base), rng)
