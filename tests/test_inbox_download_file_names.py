"""A stored file is handed to a person (the inbox's download, an MCP resource's name) under its
record's name only when the file name rule (``toolhost.file_name_problem``) allows it: a name
stored before the rule, or by a plugin that never asked it, that pads a false extension away
from the real one is replaced by the artifact's id. A real ``toolhost serve --http``, its
SQLite record and the MCP SDK's client."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the toolhost-core[mcp] extra (the MCP SDK) is not installed")

from journeys.journey_support import meta, ok, run
from test_inbox_http import ADA_INBOX, _login, ada_served, inbox_deployment

from toolhost import file_name_problem
from toolhost._mcp.resources import resource_link

PADDED = "r.pdf" + " " * 40 + ".exe"


@pytest.mark.parametrize("name", [
    PADDED, "r.pdf" + " " * 40 + "x.exe", "two  spaces.txt",
    "invoice.pdf" + "\u3164" * 40 + ".exe", "report.txt ", "CON.txt",
])
def test_the_rule_refuses_a_name_that_pads_or_breaks(name: str) -> None:
    assert file_name_problem(name) is not None


@pytest.mark.parametrize("name", ["report.txt", "a b c.md", "données 2024.csv", "CONSOLE.txt"])
def test_the_rule_lets_a_plain_name_through(name: str) -> None:
    assert file_name_problem(name) is None


def test_a_stored_name_that_pads_an_extension_is_not_the_name_a_person_gets(
    tmp_path: Path,
) -> None:
    people = inbox_deployment(tmp_path)

    async def journey() -> None:
        async with ada_served(people) as (base, ada):
            exported = await ada.call_tool("artifact.export",
                                           {"content": "MZ", "name": "report.txt"})
            call_id = meta(exported, "invocationId")
            artifact_id = ok(exported)["id"]
            # As a record written before the rule, or by a plugin that never applied it.
            with closing(sqlite3.connect(people.data_dir / "toolhost.sqlite3")) as db, db:
                db.execute("UPDATE artifacts SET name = ? WHERE id = ?", (PADDED, artifact_id))
            with closing(_login(base, ADA_INBOX)) as browser:
                page = browser.get(f"/ui/calls/{call_id}").text
                links = re.findall(rf'href="(/ui/calls/{call_id}/files/[^"]+)"', page)
                assert links == [f"/ui/calls/{call_id}/files/{artifact_id}"]
                got = browser.get(links[0])
                assert got.status_code == 200 and got.content == b"MZ"
                assert got.headers["content-disposition"] == (
                    f"attachment; filename*=UTF-8''{artifact_id}")
            listed = (await ada.list_resources()).resources
            assert [(str(r.uri), r.name) for r in listed] == [
                (f"toolhost://artifacts/{artifact_id}", artifact_id)]

    run(journey)


def test_a_result_links_a_file_whose_name_pads_an_extension_under_its_id() -> None:
    ref = {"id": "a1", "name": PADDED, "media_type": "application/octet-stream",
           "byte_count": 2}
    assert resource_link(ref).name == "a1"
    assert resource_link({**ref, "name": "report.txt"}).name == "report.txt"
