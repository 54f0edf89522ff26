"""The import's fast readings (issue #27) hold to what they replace: ``split`` to the feed
parser, ``decode_unstructured`` and ``simple_content_type`` to ``policy.default``, ``mbox`` to
``mailbox.mbox``, the rows' JSON to ``json.dumps``. The worker pool, forked or spawned, stores
and reports what one process does (a malformed message twice included), and a worker that
dies leaves nothing imported."""

from __future__ import annotations

import base64
import io
import json
import mailbox
import multiprocessing
import os
import random
import threading
from email import policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from mail_support import MALFORMED, OWNER, mail, write_mbox
from mime_shapes import HAND_WRITTEN, library_written, shapes
from toolhost_email import importer, mbox, open_mail_cache, parse, rows
from toolhost_email.importer import ImportFailed, import_path
from toolhost_email.rows import _pairs, _strings
from toolhost_email.split import simple_content_type, split
from toolhost_email.words import decode_unstructured


def _tree(part: EmailMessage) -> list[object]:
    """What ``get_body`` and ``get_content`` read of a message: each part's type and
    disposition, and each text or attachment payload (a message/* part's inside is never read)."""
    out: list[object] = [(part.get_content_type(), part.is_attachment(),
                          part.get("content-transfer-encoding"))]
    if part.get_content_maintype() == "message":
        return out
    if part.is_multipart():
        for sub in part.iter_parts():
            out += _tree(sub)  # type: ignore[arg-type]  # iter_parts' stub says Message
    else:
        out.append(part.get_payload())
    return out


def test_split_reads_every_shape_as_the_parser_does(monkeypatch: pytest.MonkeyPatch) -> None:
    split_ones = 0
    for raw in shapes(mutations=1500):
        fast = split(raw, parse._POLICY)
        read = parse.parse_message(OWNER, raw)
        with monkeypatch.context() as m:
            m.setattr(parse, "split", lambda raw, policy: None)
            parsed = parse.parse_message(OWNER, raw)
        assert read == parsed, raw
        if fast is not None:
            split_ones += 1
            standard = parse._PARSER.parsebytes(raw)
            assert fast[0] == list(standard.raw_items()), raw
            assert _tree(fast[1]) == _tree(standard), raw  # type: ignore[arg-type]
    assert split_ones > 800  # the fast reading is the one that runs


def test_the_shapes_mail_has_take_the_fast_reading() -> None:
    for message in library_written():  # alternatives, attachments, related, forwarded, ...
        assert split(message.as_bytes(), parse._POLICY) is not None, message
    crlf = next(t for t in HAND_WRITTEN if "CRLF mail" in t).encode()
    envelope = next(t for t in HAND_WRITTEN if "envelope line first" in t).encode()
    for other in (crlf, envelope, b"\nno header section\n"):
        assert split(other, parse._POLICY) is None  # the parser reads these


def _content_type(rng: random.Random) -> str:
    token = "".join(rng.choice("abcXYZ019.+_-") for _ in range(rng.randrange(1, 6)))
    quoted = "".join(rng.choice("aZ09'()+_,./:=- ?\\\";") for _ in range(rng.randrange(0, 8)))
    params = [rng.choice([f"boundary={token}", f'boundary="{quoted}"', f"charset={token}",
                          f'Name="{quoted}"', "format=flowed", f"x-{token}={token}",
                          f"boundary*={token}", "(c) a=b", "a=", f"{token}"])
              for _ in range(rng.randrange(0, 4))]
    separators = [rng.choice(["; ", ";", ";\n ", ";\n\t", " ; ", ";  "]) for _ in params]
    ctype = rng.choice(["multipart/alternative", "Multipart/Mixed", "text/plain", "text",
                        "application/vnd.ms-excel", "a/b/c", "multipart/x.y+z", "text/"])
    return ctype + "".join(s + p for s, p in zip(separators, params, strict=True))


def test_a_plain_content_type_is_read_as_the_policy_reads_it() -> None:
    rng = random.Random(27)
    read = 0
    for _ in range(4000):
        raw = _content_type(rng)
        simple = simple_content_type(raw)
        if simple is None:
            continue
        read += 1
        message = EmailMessage(policy=policy.default)
        message.set_raw("Content-Type", raw)
        ctype, params = simple
        assert ctype == message.get_content_type(), raw
        for name, value in params.items():
            assert message.get_param(name) == value, raw
        if ctype.startswith("multipart/"):
            assert params.get("boundary") == message.get_boundary(), raw
    assert read > 500


def _encoded_word(rng: random.Random) -> str:
    charset = rng.choice(["utf-8", "UTF-8", "iso-8859-1", "us-ascii", "koi8-r", "utf-16",
                          "x-unknown", "base64", "shift_jis", "utf-8*en"])
    text = rng.choice(["Grüße", "plain", "a_b c", "x=y?z", "日本語", "", " spaced ", "\x00"])
    try:
        data = text.encode(charset.split("*")[0])
    except LookupError:
        data = text.encode()
    except UnicodeEncodeError:
        data = bytes(rng.randrange(256) for _ in range(3))
    if rng.random() < 0.5:
        encoded = base64.b64encode(data).decode()
        encoded = rng.choice([encoded, encoded.rstrip("="), encoded + "!", encoded[:-1]])
        return f"=?{charset}?{rng.choice('bB')}?{encoded}?="
    encoded = "".join(chr(b) if chr(b).isalnum() and b < 128 else f"={b:02X}" for b in data)
    encoded = rng.choice([encoded, "=" + encoded, encoded + "=Z", encoded + "_"])
    return f"=?{charset}?{rng.choice('qQ')}?{encoded}?="


def test_an_unstructured_value_is_decoded_as_the_policy_decodes_it() -> None:
    rng = random.Random(27)
    decoded = 0
    for _ in range(4000):
        words = [rng.choice([_encoded_word(rng), _encoded_word(rng) + rng.choice(["x", "=?"]),
                             "".join(rng.choice("ab=?_-.;\"\\") for _ in range(3)), "plain"])
                 for _ in range(rng.randrange(1, 5))]
        value = rng.choice(["", " ", "\t"]) + "".join(
            w + rng.choice([" ", "  ", "\t", " \t"]) for w in words).rstrip(rng.choice(["", " "]))
        fast = decode_unstructured(value)
        if fast is None:
            continue
        decoded += 1
        for name in ("Subject", "X-Anything", "Comments"):
            assert fast == str(policy.default.header_fetch_parse(name, value)), value
    assert decoded > 1000


@pytest.mark.parametrize(("value", "decoded"), [
    ("=?utf-8?b?R3LDvMOfZQ==?= =?utf-8?q?_und_mehr?=", "Grüße und mehr"),
    ("=?utf-8?q?a?=  x  =?utf-8?q?b?=", "a  x  b"),
    ("plain words only", "plain words only"),
    ("=?utf-8*de?q?a?=", None),  # a language: the parser's
    ("=?utf-8?b?R3LDvMOfZQ?=", None),  # padding repaired by the parser, with a defect
    ("=?x-unknown?q?a?=", None),
    ("x=?utf-8?q?a?=", None),  # no blank before the word
    ("Grüße raw", None),  # not ASCII: raw 8-bit bytes
])
def test_the_plain_unstructured_values(value: str, decoded: str | None) -> None:
    assert decode_unstructured(value) == decoded


_MBOX_LINES = (b"From a@b Sat Jan  1 00:00:00 2000\n", b"\n", b"From x\n", b"from x\n",
               b">From x\n", b"Subject: hi\n", b"text\n", b"From", b"From \n", b" From x\n",
               b"\r\n", b"From y\r\n", b"no newline", b"\n\n", b"xFrom y\n")


def test_an_mbox_is_split_where_mailbox_splits_it(tmp_path: Path) -> None:
    rng = random.Random(27)
    path = tmp_path / "box"
    for _ in range(600):
        data = b"".join(rng.choice(_MBOX_LINES) for _ in range(rng.randrange(25)))
        path.write_bytes(rng.choice([b"", _MBOX_LINES[0]]) + data)
        box = mailbox.mbox(path, create=False)
        expected = [box.get_file(key).read(40) for key in box.iterkeys()]
        box.close()
        with path.open("rb") as file:
            spans = mbox.spans(file)
        for block in (1, 5, 6, 7, 4096):
            with path.open("rb") as file:
                assert mbox.spans(file, block) == spans, data
        with path.open("rb") as file:
            assert list(mbox.messages(file, 40)) == expected, data


class _Reads(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.sizes: list[int] = []

    def read(self, size: int | None = -1, /) -> bytes:
        self.sizes.append(-1 if size is None else size)
        return super().read(size)


def test_an_mbox_message_is_read_no_further_than_its_bound(tmp_path: Path) -> None:
    src = write_mbox(tmp_path / "in.mbox", [mail(body="x" * 20_000), mail(body="small\n")])
    file = _Reads(src.read_bytes())
    messages = list(mbox.messages(file, 4096))
    assert len(messages) == 2 and len(messages[0]) == 4096
    # The search reads the file in blocks and keeps none; each message is one bounded read.
    assert max(file.sizes) <= 1 << 20 and max(file.sizes[-2:]) <= 4096


def test_the_rows_json_is_json_dumps() -> None:
    rng = random.Random(27)
    alphabet = ["a", " ", '"', "\\", "\n", "\x00", "\x1f", "\x7f", "é", "\u2028", "😀", "/"]
    for _ in range(3000):
        pairs = tuple((
            "".join(rng.choice(alphabet) for _ in range(rng.randrange(4))),
            "".join(rng.choice(alphabet) for _ in range(rng.randrange(4))))
            for _ in range(rng.randrange(4)))
        assert _pairs(pairs) == json.dumps(pairs, ensure_ascii=False)
        assert _strings(a for a, _ in pairs) == json.dumps([a for a, _ in pairs],
                                                           ensure_ascii=False)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_malformed_message_twice_is_one_skip_and_one_duplicate(tmp_path: Path,
                                                                 workers: int) -> None:
    # Regression: a worker could still be parsing the first copy when the second was read
    # (a duplicate then), or have stored it (a second skip): the report depended on timing.
    messages: list[Any] = [mail(message_id=f"<r{i}@example.org>", body=f"{i}\n")
                           for i in range(1200)]
    messages[10] = messages[1150] = MALFORMED
    report = import_path(tmp_path / "cache", OWNER, write_mbox(tmp_path / "in.mbox", messages),
                         workers=workers)
    assert (report.seen, report.added, report.duplicates, dict(report.skipped)) == (
        1200, 1198, 1, {"no_header_section": 1})


def test_a_pool_of_either_start_method_stores_what_one_process_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    src = write_mbox(tmp_path / "in.mbox", [mail(message_id=f"<s{i}@example.org>",
                                                  body=f"{i}\n") for i in range(1100)])

    def stored(data_dir: Path) -> list[object]:
        with open_mail_cache(data_dir) as cache:
            return [(m, cache.source(m.message_key)) for m in cache.messages()]

    assert import_path(tmp_path / "one", OWNER, src).added == 1100
    # fork only where this process would fork: a test runner may have threads
    for method in {"spawn", importer._start_method()}:
        monkeypatch.setattr(importer, "_start_method", lambda method=method: method)
        assert import_path(tmp_path / method, OWNER, src, workers=2).added == 1100
        assert stored(tmp_path / method) == stored(tmp_path / "one")


def _parse_or_die(account: str, batch: list[tuple[str, bytes]]) -> rows.Parsed:
    """The batch's rows here; in a worker, the end of it, as when a worker is killed."""
    if multiprocessing.parent_process() is not None:
        os._exit(1)
    return rows.parse_batch(account, batch)


def test_a_worker_that_dies_leaves_nothing_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    src = write_mbox(tmp_path / "in.mbox", [mail(message_id=f"<d{i}@example.org>")
                                            for i in range(1100)])
    monkeypatch.setattr(importer, "parse_batch", _parse_or_die)
    with pytest.raises(ImportFailed, match=r"BrokenProcessPool.*nothing of it was imported"):
        import_path(tmp_path / "cache", OWNER, src, workers=2)
    with open_mail_cache(tmp_path / "cache") as cache:
        assert (list(cache.messages()), cache.generation()) == ([], 0)


def test_a_process_with_a_thread_spawns_its_workers() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert importer._start_method() == "spawn"
    finally:
        stop.set()
        thread.join()
