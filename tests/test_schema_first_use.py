"""Validators compile at registration and execute on first use: each behaves exactly as
fastjsonschema's own ``compile`` of the same schema, ``$defs``/``$ref`` and ``$id`` included."""

from __future__ import annotations

import copy
from typing import Any

import fastjsonschema
import pytest

from toolhost._registration.schema import SchemaProblem, compile_schema

SCHEMAS: dict[str, dict[str, Any]] = {
    "flat": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3,
                                                     "default": "x"}},
             "required": [], "additionalProperties": False},
    "refs": {"type": "object", "$defs": {"n": {"type": "integer", "minimum": 0}},
             "properties": {"a": {"$ref": "#/$defs/n"},
                            "b": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
             "required": ["a"], "additionalProperties": False},
    "id": {"$id": "http://example.invalid/s", "type": "object",
           "properties": {"a": {"type": "boolean", "default": True}},
           "required": [], "additionalProperties": False},
}
DATA: list[Any] = [{}, {"a": "ab"}, {"a": "abcd"}, {"a": 1}, {"a": -1}, {"a": 2, "b": [1, -2]},
                   {"a": True}, {"z": 1}, [], "x", None]


def _outcome(validate: Any, data: Any) -> tuple[str, Any]:
    try:
        return "ok", validate(copy.deepcopy(data))
    except fastjsonschema.JsonSchemaValueException as exc:
        return "refused", exc.message


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("defaults", [True, False])
def test_first_use_validates_as_fastjsonschema_does(name: str, defaults: bool) -> None:
    ours = compile_schema(SCHEMAS[name], apply_defaults=defaults)
    theirs = fastjsonschema.compile(SCHEMAS[name], use_default=defaults)
    for data in DATA:
        assert _outcome(ours, data) == _outcome(theirs, data), data


def test_a_schema_that_does_not_compile_is_refused_at_registration() -> None:
    with pytest.raises(SchemaProblem, match="does not compile"):
        compile_schema({"type": "object", "properties": {"a": {"type": "nonsense"}}})


# ------------------------------------------------------- what an upstream's schema can do (D334)


def test_compiling_leaves_the_schema_as_written() -> None:
    """fastjsonschema rewrote each $ref in place, joined to the $id: the gateway's check of one
    upstream tool turned its local reference into a remote one, and the host then refused to
    start."""
    schema = {"$id": "https://schemas.example.com/search.json", "type": "object",
              "definitions": {"f": {"type": "string"}},
              "properties": {"q": {"$ref": "#/definitions/f"}},
              "required": [], "additionalProperties": False}
    written = copy.deepcopy(schema)
    validate = compile_schema(schema)
    assert schema == written
    assert validate({"q": "x"}) == {"q": "x"}


@pytest.mark.parametrize("ref", ["#/required/abc", "#/required/7", "#/nowhere"])
def test_a_ref_that_names_nothing_is_a_schema_problem(ref: str) -> None:
    schema = {"type": "object", "required": [], "additionalProperties": False,
              "properties": {"a": {"$ref": ref}}}
    with pytest.raises(SchemaProblem, match="does not compile"):
        compile_schema(schema)


def test_a_reference_to_another_document_is_never_fetched() -> None:
    """An $id with a fragment made fastjsonschema fetch the $id's URL with urllib (proxies,
    redirects, file://, no timeout) and compile the pattern it found there."""
    import http.server
    import threading

    fetched: list[str] = []

    class Schemas(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.append(self.path)
            body = b'{"definitions": {"y": {"type": "string", "pattern": "^(a+)+$"}}}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Schemas)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        schema = {"$id": f"http://127.0.0.1:{server.server_address[1]}/schema.json#x",
                  "type": "object", "required": [], "additionalProperties": False,
                  "properties": {"a": {"anyOf": [{"$ref": "#/definitions/y"}]}}}
        with pytest.raises(SchemaProblem, match="refers outside itself"):
            compile_schema(schema)
    finally:
        server.shutdown()
        server.server_close()
    assert fetched == []
