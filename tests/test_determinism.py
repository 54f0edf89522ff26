"""Only toolhost._adapters.system_clock reads ambient time or makes ids, across the host and every plugin."""

from __future__ import annotations

from pathlib import Path

from toolhost.testing import find_ambient_reads

ROOT = Path(__file__).resolve().parent.parent
DETERMINISM = ROOT / "host" / "toolhost" / "_adapters" / "system_clock.py"


def test_no_module_but_determinism_reads_ambient_state() -> None:
    roots = [ROOT / "host", *sorted((ROOT / "plugins").glob("*/src"))]
    assert len(roots) >= 3  # the host and at least math and system are scanned
    assert find_ambient_reads(roots, allowed=[DETERMINISM]) == []


def test_the_system_plugin_is_not_in_the_allowed_set() -> None:
    # Hard gate 8: system.current_time is checked like everything else, not exempted.
    current_time = ROOT / "plugins" / "system" / "src" / "toolhost_system" / "current_time.py"
    assert current_time.exists() and current_time != DETERMINISM


def test_the_check_finds_every_ambient_form(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import datetime, time, uuid, os\n"
        "import random\n"
        "from time import time as now\n"
        "from datetime import datetime as D\n"
        "datetime.datetime.now()\n"
        "D.utcnow()\n"
        "time.monotonic()\n"
        "now()\n"
        "uuid.uuid4()\n"
        "os.urandom(4)\n"
    )
    found = find_ambient_reads([tmp_path])
    assert [line.split(": ", 1)[1] for line in found] == [
        "import random",
        "from time import time",
        "datetime.datetime.now()",
        "D.utcnow()",
        "time.monotonic()",
        "now()",
        "uuid.uuid4()",
        "os.urandom()",
    ]
    assert find_ambient_reads([DETERMINISM]) != []  # the allowed module really is exempted
