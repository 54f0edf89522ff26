"""A tool table naming no tool its server lists is said with the table likely meant (D495), at
a cost the server's listing cannot make large. The hint compared every listed name (up to 1,024,
of up to 128 characters, both the upstream's to choose) by difflib's quadratic ratio: 2.5 s a
table, inside the gateway's lock and, at a server's first call under ``serve``, on the event
loop, so a ping sent meanwhile waited 19 s and ``toolhost check`` took 15 s.

Against tests/gateway_many_names_upstream.py (1,024 long names of ``a``, ``b`` and ``_``)."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from gateway_support import served, text_of

from toolhost._model.config_file import read_config
from toolhost._model.upstream import ServerState, UpstreamStatus, UpstreamTool
from toolhost._registration.gateway import Gateway

MANY = Path(__file__).with_name("gateway_many_names_upstream.py")
#: Five tables of 128-character names the server does not list: what an upstream renaming its
#: tools leaves of an operator's classification.
TABLES = "".join(
    f'\n[mcp.servers.many.tools.b{"".join(random.Random(f"table {i}").choices("ab_", k=127))}]\n'
    'risk = "HIGH"\n' for i in range(1, 6))
UNMATCHED = "names no tool the server lists, so it applies to none"


class Many:
    """A toolhost.toml naming the stdio server ``many`` (read-only, so its calls ask nobody),
    with ``tables``; what ``served`` needs."""

    def __init__(self, tmp_path: Path, tables: str = TABLES) -> None:
        self.tmp_path = tmp_path
        self.config = tmp_path / "toolhost.toml"
        self.config.write_text(f'''
[mcp.servers.many]
command = "{sys.executable}"
args = ["{MANY}"]
side_effect = "NONE"
risk = "LOW"
idempotency = "READ_ONLY"
connect_timeout_s = 60
{tables}''')
        self.config.chmod(0o600)

    def env(self) -> dict[str, str]:
        return {"TOOLHOST_CONFIG": str(self.config),
                "TOOLHOST_DATA_DIR": str(self.tmp_path / "data"),
                "TOOLHOST_PLUGINS": "toolhost-math", "HOME": str(self.tmp_path)}


def test_a_servers_first_call_leaves_the_serving_host_answering_while_the_hint_is_made(
        tmp_path: Path) -> None:
    """The listing came before the log was configured, so the first call says the tables:
    a ping sent meanwhile is answered at once, and the call is not held either."""
    many = Many(tmp_path)
    waited: dict[str, float] = {}

    async def main() -> None:
        async with served(many) as session:
            started = time.monotonic()

            async def ping() -> None:
                await anyio.sleep(0.1)
                sent = time.monotonic()
                await session.send_ping()
                waited["ping"] = time.monotonic() - sent

            async with anyio.create_task_group() as group:
                group.start_soon(ping)
                result = await session.call_tool("mcp.many__answer", {})
                waited["call"] = time.monotonic() - started
            assert not result.is_error and text_of(result) == "answered"

    anyio.run(main)
    # A loose bound on what matters, the loop answering meanwhile: the ping waited out the
    # hints (5 to 19 s) before. The call's own time is the machine's load, not asserted.
    assert waited["ping"] < 2, waited
    logged = (tmp_path / "serve.err").read_text()
    assert logged.count('"event": "gateway.tool_table_unmatched"') == 5, logged[-2000:]


def test_the_hints_for_a_listing_of_long_alike_names_cost_milliseconds(tmp_path: Path) -> None:
    """``toolhost check`` and ``plugins`` say the lines (``readiness``) of a real listing."""
    from toolhost._composition import load_host
    from toolhost._model.settings import Settings

    host = load_host(Settings.from_environ(Many(tmp_path).env()))
    try:
        assert host.gateway is not None
        started = time.monotonic()
        lines = host.gateway.readiness()
        took = time.monotonic() - started
    finally:
        host.close()
    assert sum(UNMATCHED in line for line in lines) == 5, lines
    assert took < 3.0, took  # a loose bound: 5 tables took 7 s, now milliseconds


class _Listing:
    """An ``Upstreams`` whose one server ``s`` lists ``names`` (no call is made)."""

    def __init__(self, names: list[str]) -> None:
        self.tools = tuple(UpstreamTool(name=n, description="", input_schema={"type": "object"})
                           for n in names)

    def status(self) -> list[UpstreamStatus]:
        return [UpstreamStatus(name="s", state=ServerState.CONNECTED, problem="",
                               tools=self.tools)]

    def on_tools_changed(self, callback: Any) -> None:
        pass

    def close(self) -> None:
        pass


def test_the_bounded_hint_still_finds_a_misspelling_among_many_names_alike(
        tmp_path: Path) -> None:
    """Bounding the comparison keeps the likely spelling: ``write_notes`` among 300 names of
    its length that share most of its letters."""
    config = tmp_path / "toolhost.toml"
    config.write_text('[mcp.servers.s]\ncommand = "x"\n\n[mcp.servers.s.tools.write_notes]\n'
                      'enabled = false\n\n[mcp.servers.s.tools.nothing_like_it_at_all]\n')
    config.chmod(0o600)
    alike = [f"wr{i:03d}_notes" for i in range(300)] + ["write_note", "note_write_s"]
    gateway = Gateway(read_config(config, {}).mcp_servers, _Listing(alike),  # type: ignore[arg-type]
                      monotonic=time.monotonic)
    assert [line for line in gateway.readiness() if UNMATCHED in line] == [
        f"s: [mcp.servers.s.tools.write_notes] {UNMATCHED} (did you mean "
        "[mcp.servers.s.tools.write_note]?)",
        f"s: [mcp.servers.s.tools.nothing_like_it_at_all] {UNMATCHED}",
    ]
