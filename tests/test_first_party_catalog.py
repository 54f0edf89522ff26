"""The nine first-party plugins' tools, exactly as registered: ``toolhost tools --json`` and
what it does not print (each tool's reasons, checked scopes, roster and user words), compared
with checked-in copies. A change to how tools are declared (typed functions, lazy bodies)
must leave both byte-identical; a deliberate change to a tool regenerates them with
``python tests/test_first_party_catalog.py`` and shows in review as a diff of the copies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
SPECS = DATA / "first_party_tools.json"
EXTRAS = DATA / "first_party_tool_extras.json"

FIRST_PARTY = frozenset({
    "toolhost-artifact", "toolhost-demo", "toolhost-email", "toolhost-math", "toolhost-media",
    "toolhost-people", "toolhost-sandbox", "toolhost-system", "toolhost-workspace",
})

#: The settings that make every first-party tool register (email, media and people register
#: nothing until the operator turns them on).
EVERY_TOOL_ON = {
    "AGENT_EMAIL_MODE_ENABLED": "1",
    "AGENT_EMAIL_UNSUBSCRIBE_ENABLED": "1",
    "AGENT_PEOPLE_ENABLED": "1",
    "TENSORSCALE_API_KEY": "snapshot-key",
}


def _environment(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TOOLHOST_", "AGENT_", "TENSORSCALE_"))}
    return {**env, **EVERY_TOOL_ON, "TOOLHOST_DATA_DIR": str(data_dir)}


def _dumps(data: Any) -> str:
    # toolhost tools --json's own formatting (print_json), so the copy reads as its output.
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def tools_json(data_dir: Path) -> str:
    """``toolhost tools --json``, its first-party entries only (a test machine may have
    other plugins installed), in the command's own formatting."""
    done = subprocess.run(
        [sys.executable, "-m", "toolhost._cli", "tools", "--json"], env=_environment(data_dir),
        cwd=data_dir, capture_output=True, text=True, check=True, timeout=120)
    return _dumps([e for e in json.loads(done.stdout) if e["distribution"] in FIRST_PARTY])


_EXTRAS_SCRIPT = """
import json, sys
from toolhost._cli.common import load
out = {}
for r in load().registry:
    if r.distribution not in set(sys.argv[1:]):
        continue
    t = r.tool
    out[r.spec.identity] = {
        "reasons": [{"code": x.code, "message": x.message,
                     "schema_rules": [[s.pointer, s.keyword] for s in x.schema_rules]}
                    for x in t.reasons],
        "checked_scopes": list(t.checked_scopes),
        "default_enabled": t.default_enabled,
        "always_requires_approval": t.always_requires_approval,
        "describes_calls": t.describe is not None,
        "user_words": None if t.user_words is None else {
            "prompt": t.user_words.prompt, "arguments": list(t.user_words.arguments)},
        "schema_reasons": sorted([p, k, c] for (p, k), c in r.schema_reasons.items()),
    }
sys.stdout.write(json.dumps(out, indent=2, sort_keys=True, ensure_ascii=False) + "\\n")
"""


def tool_extras(data_dir: Path) -> str:
    """Per registered first-party tool: what ``Tool`` adds to its spec."""
    done = subprocess.run(
        [sys.executable, "-c", _EXTRAS_SCRIPT, *sorted(FIRST_PARTY)],
        env=_environment(data_dir), cwd=data_dir, capture_output=True, text=True, check=True,
        timeout=120)
    return done.stdout


def test_the_first_party_specs_are_the_checked_in_copy(tmp_path: Path) -> None:
    assert tools_json(tmp_path) == SPECS.read_text(encoding="utf-8")


def test_the_first_party_reasons_and_rosters_are_the_checked_in_copy(tmp_path: Path) -> None:
    assert tool_extras(tmp_path) == EXTRAS.read_text(encoding="utf-8")


def test_the_copies_name_every_first_party_plugin() -> None:
    # A copy written on a machine missing a plugin would pin an incomplete catalog.
    assert {e["distribution"] for e in json.loads(SPECS.read_text())} == FIRST_PARTY


if __name__ == "__main__":  # regenerate the copies after a deliberate change
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        SPECS.write_text(tools_json(Path(directory)), encoding="utf-8")
        EXTRAS.write_text(tool_extras(Path(directory)), encoding="utf-8")
