"""The redaction processor: secrets never reach a log line."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
import structlog

from toolhost._pipeline.log import REDACTED, configure_logging, get_logger, redact_secrets
from toolhost._testing.clocks import FixedClock
from toolhost.testing import DEFAULT_INSTANT


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    configure_logging(FixedClock(DEFAULT_INSTANT), level="info", stream=out, json=True)
    yield out
    structlog.reset_defaults()


def test_secret_settings_and_authorization_headers_are_redacted(stream: io.StringIO) -> None:
    get_logger().info(
        "adapter.request",
        TENSORSCALE_API_KEY="sk-live-123",
        headers={"Authorization": "Bearer sk-live-123", "Accept": "image/png"},
        settings={"nested": [{"OPENAI_API_KEY": "sk-2"}]},
        note="sent Authorization: Bearer abc.def-123 upstream",
    )
    line = stream.getvalue()
    assert "sk-live-123" not in line and "sk-2" not in line and "abc.def-123" not in line
    event = json.loads(line)
    assert event["TENSORSCALE_API_KEY"] == REDACTED
    assert event["headers"] == {"Authorization": REDACTED, "Accept": "image/png"}
    assert event["settings"] == {"nested": [{"OPENAI_API_KEY": REDACTED}]}
    assert event["note"] == f"sent Authorization: Bearer {REDACTED} upstream"


def test_debug_is_filtered_at_info_and_output_is_json(stream: io.StringIO) -> None:
    log = get_logger(invocation_id="i1")
    log.debug("hidden")
    log.info("shown")
    (event,) = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert event == {"event": "shown", "invocation_id": "i1", "level": "info",
                     "timestamp": "2026-07-25T13:03:11.482913+00:00"}


def test_cookie_headers_are_redacted_as_authorization_is() -> None:
    # A session cookie (the inbox's login) is the credential itself.
    event = {"headers": {"Cookie": "toolhost_inbox_login=abc", "set-cookie": "sid=x; Path=/",
                         "Accept": "*/*"}}
    assert redact_secrets(None, "debug", event) == {
        "headers": {"Cookie": REDACTED, "set-cookie": REDACTED, "Accept": "*/*"}}


def test_signatures_and_header_pairs_are_redacted_as_fields() -> None:
    # A request's signature replays it, as in text; a header list's pairs are named by their
    # first item; bytes are read as their repr shows them.
    event = {"query": {"X-Amz-Signature": "fede0dcc", "Signature": "abc", "amzSignature": "d"},
             "headers": [("Cookie", "sid=abc"), ("Accept", "*/*")],
             "raw": [[b"set-cookie", b"sid=abc"]], "sent": b"Cookie: sid=abc"}
    assert redact_secrets(None, "debug", event) == {
        "query": {"X-Amz-Signature": REDACTED, "Signature": REDACTED, "amzSignature": REDACTED},
        "headers": [("Cookie", REDACTED), ("Accept", "*/*")],
        "raw": [[b"set-cookie", REDACTED]], "sent": f"Cookie: {REDACTED}".encode()}


def test_fields_that_name_no_secret_are_kept() -> None:
    event = {"signature_ok": True, "xsignature": "a", "pair": ("name", "sid=abc"),
             "three": ("cookie", "a", "b"), "bytes": b"\xff plain"}
    assert redact_secrets(None, "debug", event) == event


def test_a_list_of_field_names_is_not_a_pair() -> None:
    # Regression: fields=["password", "username"] was logged ["password", "[redacted]"]. A
    # (name, value) pair is a tuple, a list that is an item of a list (a header list as JSON
    # gives it) or a list of bytes (a header as the wire has it); a list on its own is names.
    names = {"fields": ["password", "username"], "schema": {"required": ["api_key", "model"]}}
    assert redact_secrets(None, "debug", names) == names
    pairs = {"header": ("Cookie", "sid=abc"), "json": [["Set-Cookie", "sid=abc"]],
             "wire": [b"cookie", b"sid=abc"], "items": {"h": [("x-api-key", "k")]}}
    assert redact_secrets(None, "debug", pairs) == {
        "header": ("Cookie", REDACTED), "json": [["Set-Cookie", REDACTED]],
        "wire": [b"cookie", REDACTED], "items": {"h": [("x-api-key", REDACTED)]}}


def test_the_processor_leaves_other_values_alone() -> None:
    assert redact_secrets(None, "info", {"a": 1, "b": ["x"]}) == {"a": 1, "b": ["x"]}


# Credentials inside strings, in the forms a log line carries them (issue 10's concern). Each
# case is the string before and after; the name or scheme stays, the credential goes.
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1In0.c2lnbmF0dXJl"
GITHUB = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"


@pytest.mark.parametrize(("text", "expected"), [
    # The scheme forms: a colon, URL and form encodings, a token with an underscore.
    (f"Authorization: Bearer: {JWT}", f"Authorization: Bearer: {REDACTED}"),
    (f"GET /cb?auth=Bearer%20{JWT}&x=1", f"GET /cb?auth=Bearer%20{REDACTED}&x=1"),
    (f"auth=Bearer+{JWT}", f"auth=Bearer+{REDACTED}"),
    (f"Bearer {GITHUB} sent", f"Bearer {REDACTED} sent"),
    ("Authorization: Basic%20dXNlcjpwYXNz", f"Authorization: Basic%20{REDACTED}"),
    ("Authorization: Token 9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b",
     f"Authorization: Token {REDACTED}"),
    (f"sent token {GITHUB}", f"sent token {REDACTED}"),
    ("Token: abcdef", f"Token: {REDACTED}"),
    # Query and form parameters.
    ("GET https://api.example.invalid/v1/me?access_token=ya29.a0AfH6SMB&page=2",
     f"GET https://api.example.invalid/v1/me?access_token={REDACTED}&page=2"),
    ("POST /t body=grant_type=refresh&refresh_token=1//0gLx&client_secret=s3cr3t",
     f"POST /t body=grant_type=refresh&refresh_token={REDACTED}&client_secret={REDACTED}"),
    ("GET /v1?token=abc123#top", f"GET /v1?token={REDACTED}#top"),
    ("GET /v1?api_key=k-1&apikey=k-2", f"GET /v1?api_key={REDACTED}&apikey={REDACTED}"),
    # Headers written into a string, and a settings line.
    ("sent x-api-key: sk-live-123 upstream", f"sent x-api-key: {REDACTED} upstream"),
    ("X-API-Key:sk-live-123", f"X-API-Key:{REDACTED}"),
    ('headers {"x-api-key": "sk-live-123", "accept": "*/*"}',
     f'headers {{"x-api-key": "{REDACTED}", "accept": "*/*"}}'),
    ("env OPENAI_API_KEY=sk-2 python run.py", f"env OPENAI_API_KEY={REDACTED} python run.py"),
    ("password: hunter2", f"password: {REDACTED}"),
    # Regressions (issue #26): an Authorization header of any scheme or none, also in a
    # dict's repr; a credential with characters outside RFC 6750's; a bare provider key.
    ("Authorization: Custom 9944b09199c62bcf", f"Authorization: Custom {REDACTED}"),
    ("{'Authorization': 'Token zzz', 'Accept': '*/*'}",
     f"{{'Authorization': 'Token {REDACTED}', 'Accept': '*/*'}}"),
    ("{'authorization': 'opaque-secret'}", f"{{'authorization': '{REDACTED}'}}"),
    ("Proxy-Authorization: Basic dXNlcjpw", f"Proxy-Authorization: Basic {REDACTED}"),
    ("Bearer tok!x", f"Bearer {REDACTED}"),
    ("the key was sk-proj-4f9Q2a7Rb1Xc8Zt6Yw3Vq0 all along", f"the key was {REDACTED} all along"),
    ("gh token ghp_16C7e42F292c6912E7710c838347Ae178B4a", f"gh token {REDACTED}"),
    ("aws AKIAIOSFODNN7EXAMPLE", f"aws {REDACTED}"),
    # Headers as a bytes repr (botocore's, urllib3's and requests'
    # dicts), a quoted value read to its closing quote (SigV4's holds spaces), cookies, a
    # request's signature, a session's temporary AWS key id.
    ("headers={'X-Amz-Security-Token': b'SESSIONTOKENabc999', 'x-api-key': B\"K-42\"}",
     f"headers={{'X-Amz-Security-Token': b'{REDACTED}', 'x-api-key': B\"{REDACTED}\"}}"),
    ("{'Authorization': b'AWS4-HMAC-SHA256 Credential=ASIAIOSFODNN7EXAMPLE/20261207/us-east-1"
     "/s3/aws4_request, SignedHeaders=host, Signature=fede0dcc94c4', 'Accept': b'*/*'}",
     f"{{'Authorization': b'AWS4-HMAC-SHA256 {REDACTED}', 'Accept': b'*/*'}}"),
    ('{"password": "two words", "user": "bob"}', f'{{"password": "{REDACTED}", "user": "bob"}}'),
    ("{'password': 'it\\'s'}", f"{{'password': '{REDACTED}'}}"),
    ("password: 'never closed\nthe next line", f"password: '{REDACTED}\nthe next line"),
    ("{'Cookie': b'toolhost_inbox_login=abc; theme=dark'}", f"{{'Cookie': b'{REDACTED}'}}"),
    ("sent Cookie: sid=abc; theme=dark upstream", f"sent Cookie: {REDACTED} upstream"),
    ("Set-Cookie: sid=abc; Path=/; HttpOnly", f"Set-Cookie: {REDACTED}"),
    ("Signature:\nabc0704be59fb89bac4e6c9f5ee6e05", f"Signature:\n{REDACTED}"),
    ("GET /k?X-Amz-Signature=deadbeef&X-Amz-Date=20261207T1",
     f"GET /k?X-Amz-Signature={REDACTED}&X-Amz-Date=20261207T1"),
    ("temporary key ASIAIOSFODNN7EXAMPLE", f"temporary key {REDACTED}"),
    # Headers as (name, value) pairs (httpcore's list of bytes tuples, a list of str tuples,
    # JSON's lists), and a header with a list of values: the marker replaces the values.
    ("receive_response_headers.complete return_value=(b'HTTP/1.1', 200, b'OK', [(b'Server', "
     "b'uvicorn'), (b'set-cookie', b'session=abc; Path=/; HttpOnly'), (b'X-Api-Key', b'k-42')])",
     "receive_response_headers.complete return_value=(b'HTTP/1.1', 200, b'OK', [(b'Server', "
     f"b'uvicorn'), (b'set-cookie', b'{REDACTED}'), (b'X-Api-Key', b'{REDACTED}')])"),
    ("headers=[(b'Authorization', b'Bearer zzz'), (b'Cookie', b'sid=abc')]",
     f"headers=[(b'Authorization', b'Bearer {REDACTED}'), (b'Cookie', b'{REDACTED}')]"),
    ("[('authorization', 'Token zzz'), ('cookie', 'sid=abc; theme=dark')]",
     f"[('authorization', 'Token {REDACTED}'), ('cookie', '{REDACTED}')]"),
    ('[["Set-Cookie", "sid=abc"], ["x-amz-security-token","SESSIONtok9"]]',
     f'[["Set-Cookie", "{REDACTED}"], ["x-amz-security-token","{REDACTED}"]]'),
    ("{'Cookie': ['sid=abc', 'theme=dark'], 'Accept': ['*/*']}",
     f"{{'Cookie': [{REDACTED}], 'Accept': ['*/*']}}"),
    ('"x-amz-security-token": ["SESSIONtok9"]', f'"x-amz-security-token": [{REDACTED}]'),
    ("{'set-cookie': [b'a=1', b'b=\\'2]']}", f"{{'set-cookie': [{REDACTED}]}}"),
    # URL-encoded: a form body holding JSON, a redirect's nested query, an encoded space kept
    # in the value, upper and lower case.
    ("payload=%7B%22token%22%3A%20%22abc%20def%22%2C%22user%22%3A%22bob%22%7D",
     f"payload=%7B%22token%22%3A%20%22{REDACTED}%22%2C%22user%22%3A%22bob%22%7D"),
    ("GET /login?next=%2Fcb%3Faccess_token%3Ds3cr3t%26page%3D2&x=1",
     f"GET /login?next=%2Fcb%3Faccess_token%3D{REDACTED}%26page%3D2&x=1"),
    ("body=api_key%3Dk-42&user=bob", f"body=api_key%3D{REDACTED}&user=bob"),
    ("%7b%22accessToken%22%3a%22AbC%22%7d", f"%7b%22accessToken%22%3a%22{REDACTED}%22%7d"),
])
def test_credentials_inside_strings_are_redacted(text: str, expected: str) -> None:
    assert redact_secrets(None, "info", {"note": text}) == {"note": expected}
    assert redact_secrets(None, "info", {"nested": [{"a": (text,)}]}) == {
        "nested": [{"a": (expected,)}]}


@pytest.mark.parametrize("text", [
    "the authorization was granted by the operator",
    "sk-learn is a library; a task-list",
    "Token limit exceeded: 4096 tokens used of 4096",
    "the tokenizer split the prompt into 12 tokens",
    "max_tokens=512 input_tokens: 40 token_count: 7",
    "no password was set; the secret store is empty",
    "reading notes.md (1048576 bytes): sha256:2c26b46b68ffc68ff99b453c1d304134",
    "GET https://example.invalid/search?q=token&page=2",
    "Tokenization of the api key docs, the x-api-key header and access tokens",
    "the signature was checked; the cookie jar is empty; a bytes value b'abc'",
    "{'Authorization': '', 'X-Amz-Date': b'20261207T132346Z'}",
    # A comma after a secret's name is a pair's only where the name opens a tuple or list.
    "the fields 'password', 'user' and 'token', 'name' were missing",
    "[(b'content-type', b'text/plain'), (b'x-request-id', b'r-1')]",
    # A list of names is not a pair, nor a tuple of more than two.
    "missing fields ['password', 'username']",
    'required: ["api_key", "model", "prompt"]',
    "fields=('password', 'username', 'email')",
    "q=%7B%22max_tokens%22%3A5%2C%22tokens%22%3A3%7D&at=10%3A00",
    "",
])
def test_ordinary_text_is_untouched(text: str) -> None:
    assert redact_secrets(None, "info", {"note": text}) == {"note": text}


# URL-encoded twice: a URL put in another URL's query (a login's `next=`, a redirect's target).
@pytest.mark.parametrize(("text", "expected"), [
    ("payload=%257B%2522token%2522%253A%2522S3CRET%2522%257D",
     f"payload=%257B%2522token%2522%253A%2522{REDACTED}%2522%257D"),
    ("body=api_key%253DS3CRET&user=bob", f"body=api_key%253D{REDACTED}&user=bob"),
    ("GET /login?next=%252Fcb%253Faccess_token%253DS3CRET%2526page%253D2&x=1",
     f"GET /login?next=%252Fcb%253Faccess_token%253D{REDACTED}%2526page%253D2&x=1"),
    ("%257b%2527clientSecret%2527%253a%2520%2527S3%2520CRET%2527%257d",
     f"%257b%2527clientSecret%2527%253a%2520%2527{REDACTED}%2527%257d"),
    # The once-encoded layer around it ends the value as well.
    ("next=%2Fcb%3Fr%3D%252Fx%253Ftoken%253DS3CRET%26y%3D2",
     f"next=%2Fcb%3Fr%3D%252Fx%253Ftoken%253D{REDACTED}%26y%3D2"),
    # Once encoded, a %25 is a literal percent sign of the value: it does not end it.
    ("token%3DS3%2522CRET&x=1", f"token%3D{REDACTED}&x=1"),
])
def test_twice_url_encoded_credentials_are_redacted(text: str, expected: str) -> None:
    assert redact_secrets(None, "info", {"note": text}) == {"note": expected}


def test_twice_url_encoded_text_without_a_credential_is_untouched() -> None:
    for text in ("q=%257B%2522max_tokens%2522%253A5%252C%2522tokens%2522%253A3%257D",
                 "next=%252Fsearch%253Fq%253Dtoken%2526page%253D2"):
        assert redact_secrets(None, "info", {"note": text}) == {"note": text}


#: Command lines and (name, value) lists as a program logs them (argv, ``shlex.split``), each
#: with the items it must show: the value after a secret's flag or name goes, the rest stays.
ARGV = [
    (["--password", "S3CRET"], ["--password", REDACTED]),
    (["token", "S3CRET"], ["token", REDACTED]),
    (["--password", "S3CRET", "--verbose"], ["--password", REDACTED, "--verbose"]),
    (["mysql", "-h", "db", "--password", "hunter", "-v"],
     ["mysql", "-h", "db", "--password", REDACTED, "-v"]),
    (["curl", "-u", "user:S3CRET", "https://api.example.invalid"],
     ["curl", "-u", REDACTED, "https://api.example.invalid"]),
    (["tool", "--api-key", "k-42", "--client-secret", "c s"],
     ["tool", "--api-key", REDACTED, "--client-secret", REDACTED]),
    # curl's user attached to its flag: the flag stays, the ``user:password`` goes whole.
    (["curl", "-ualice:S3CRET", "https://api.example.invalid"],
     ["curl", f"-u{REDACTED}", "https://api.example.invalid"]),
    (["curl", "-Ualice:S3 CRET", "--user=bob:S3CRET", "--proxy-user=carol:S3CRET"],
     ["curl", f"-U{REDACTED}", f"--user={REDACTED}", f"--proxy-user={REDACTED}"]),
    (["mysql", "--password=S3CRET", "db"], ["mysql", f"--password={REDACTED}", "db"]),
    # A list alone whose second item no name is shaped like: a digit inside a word, a
    # capitalised word ending in digits, a sign.
    (["token", "S3CRET-xyz"], ["token", REDACTED]),
    (["password", "Summer2024"], ["password", REDACTED]),
    (["api_key", "a1b2c3d4e5"], ["api_key", REDACTED]),
]


@pytest.mark.parametrize(("argv", "shown"), ARGV)
def test_the_value_after_a_secrets_flag_or_name_is_hidden(
        argv: list[str], shown: list[str]) -> None:
    # Regression: since D528 a list on its own was taken for field names, so
    # ['--password', 'S3CRET'] was logged whole, as a list and in its repr and JSON text.
    assert redact_secrets(None, "info", {"argv": argv, "tuple": tuple(argv)}) == {
        "argv": shown, "tuple": tuple(shown)}
    for text, expected in ((repr(argv), repr(shown)), (json.dumps(argv), json.dumps(shown)),
                           (json.dumps({"a": json.dumps(argv)}),
                            json.dumps({"a": json.dumps(shown)})),
                           (repr([a.encode() for a in argv]),
                            repr([a.encode() for a in shown]))):
        assert redact_secrets(None, "info", {"note": f"ran {text}"}) == {
            "note": f"ran {expected}"}


@pytest.mark.parametrize("names", [
    ["password", "token"], ("api_key", "secret"), ["password", "username"],
    ["api_key", "model"], ("password", "username", "email"), ["--password", "--token"],
    ["sort", "-u", "notes.txt"], ["mysql", "-u", "root"], ["--password"],
    # Header names (a CORS allowed-headers list), names with digits, names that start with a
    # secret's: D538 hid the second of each as a value.
    ["Authorization", "Content-Type"], ["Authorization", "Accept"],
    ["X-Api-Key", "X-Request-Id"], ["api_key", "X-Request-Id"], ["Cookie", "Content-MD5"],
    ["Authorization", "X-B3-TraceId"], ["authorization", "content-type"],
    ["password", "password2"], ["password", "address2"], ["api_key", "address_line_1"],
    ["token", "token_type"], ["password", "passwordConfirmation"], ["api_key", "DATABASE_URL"],
    ["curl", "-ualice", "https://api.example.invalid"], ["ssh", "-p2222", "host"],
])
def test_a_list_or_tuple_of_names_is_kept(names: list[str] | tuple[str, ...]) -> None:
    # ("api_key", "secret") was taken for a pair since D520 and its second name hidden; a
    # two-item tuple naming a secret first and no secret second is still a pair (a header).
    assert redact_secrets(None, "info", {"names": names}) == {"names": names}
    for text in (repr(names), json.dumps(names)):
        assert redact_secrets(None, "info", {"note": f"fields {text}"}) == {
            "note": f"fields {text}"}


def test_a_command_line_reaches_the_log_without_its_secret(stream: io.StringIO) -> None:
    argv = ["deploy", "--token", "S3CRET", "--region", "eu"]
    get_logger().info("plugin.spawned", argv=argv, note=f"running {argv!r}")
    line = stream.getvalue()
    assert "S3CRET" not in line
    event = json.loads(line)
    assert event["argv"] == ["deploy", "--token", REDACTED, "--region", "eu"]
    assert event["note"] == f"running ['deploy', '--token', '{REDACTED}', '--region', 'eu']"
