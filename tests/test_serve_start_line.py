"""The line ``serve --http`` starts with: where it serves, and which Host names it answers."""

from __future__ import annotations

from toolhost._mcp.config import LOOPBACK_HOSTS
from toolhost._mcp.server import _serving_at


def test_the_default_hosts_admit_the_bound_address() -> None:
    assert _serving_at("5 tools", "127.0.0.1", 8766, (*LOOPBACK_HOSTS, "127.0.0.1:8766")) == (
        "serving 5 tools at http://127.0.0.1:8766/mcp")


def test_a_host_list_without_the_bound_address_is_named_on_the_start_line() -> None:
    # TOOLHOST_HTTP_ALLOWED_HOSTS replaces the defaults: the printed URL answers 421.
    assert _serving_at("5 tools", "127.0.0.1", 8766, ("mcp.example.org:443",)) == (
        "serving 5 tools at http://127.0.0.1:8766/mcp (for Host mcp.example.org:443 only: "
        "TOOLHOST_HTTP_ALLOWED_HOSTS does not list 127.0.0.1:8766)")
    assert _serving_at("1 tool", "::1", 80, ("[::1]:*",)) == "serving 1 tool at http://[::1]:80/mcp"


def test_every_address_is_no_host_a_client_names() -> None:
    assert _serving_at("5 tools", "0.0.0.0", 8766, ("mcp.example.org:443",)) == (
        "serving 5 tools at http://0.0.0.0:8766/mcp")


def test_a_host_list_from_toolhost_toml_is_named_where_it_was_written() -> None:
    assert _serving_at("5 tools", "127.0.0.1", 8766, ("mcp.example.org:443",),
                       "/etc/toolhost.toml:4: [http] allowed_hosts") == (
        "serving 5 tools at http://127.0.0.1:8766/mcp (for Host mcp.example.org:443 only: "
        "/etc/toolhost.toml:4: [http] allowed_hosts does not list 127.0.0.1:8766)")
