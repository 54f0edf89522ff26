"""A token file (``TOOLHOST_HTTP_TOKENS_FILE``) holds each token once: two entries with one
``sha256`` are refused as the file's other errors are, naming both entries by position and
principal and never the digest. Before, the first of them silently won: Ada's entry copied for
Bob above hers, its digest left as hers, made Ada's token Bob's.

At the start of the real ``toolhost serve --http`` that is one line and exit code 2; a file
changed so while serving keeps its last good tokens in force and logs why."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import write_tokens
from test_http_setting_pairs_named_where_written import serve_http

from toolhost._mcp.http_auth import TokenFile

ADA, CAROL = "ada-token-7f3e", "carol-token-55aa"


def bob_copied_from_ada(path: Path) -> Path:
    """Carol's entry, then Ada's copied and renamed for Bob but left with her digest, above
    hers: the mistake the refusal is for."""
    return write_tokens(path, (CAROL, "carol", []), (ADA, "bob", []), (ADA, "ada", []))


def refusal_of(path: Path) -> str:
    return (f"{path}: tokens 2 (principal 'bob') and 3 (principal 'ada') have the same sha256 "
            "(each token may be in the file once)")


def test_a_duplicate_digest_refuses_the_server_at_its_start(tmp_path: Path) -> None:
    tokens = bob_copied_from_ada(tmp_path / "tokens.toml")
    stderr, _ = serve_http(tmp_path, None, TOOLHOST_HTTP_TOKENS_FILE=str(tokens))
    assert stderr == f"toolhost: {refusal_of(tokens)}\n"
    assert hashlib.sha256(ADA.encode()).hexdigest() not in stderr


def test_a_duplicate_digest_while_serving_keeps_the_last_good_tokens(
        tmp_path: Path, logged: io.StringIO) -> None:
    path = write_tokens(tmp_path / "tokens.toml", (CAROL, "carol", []), (ADA, "ada", []))
    tokens = TokenFile(path)
    bob_copied_from_ada(path)
    caller = tokens.verify(ADA)
    assert caller is not None and caller.principal.id == "ada"
    lines = [json.loads(line) for line in logged.getvalue().splitlines()]
    assert [(line["level"], line["event"], line["problem"]) for line in lines] == [
        ("warning", "http.auth.tokens_unusable", refusal_of(path))]
    assert hashlib.sha256(ADA.encode()).hexdigest() not in logged.getvalue()
