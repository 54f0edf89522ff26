"""The determinism scan (toolhost._registration.ambient) beyond the host-wide check: aliases, references,
entropy modules, pure conversions, lookalikes, unparsable files and exemptions."""

from __future__ import annotations

import textwrap
from pathlib import Path

from toolhost._registration.ambient import find_ambient_reads, scan_source


def _found(source: str) -> list[str]:
    return [line.split(": ", 1)[1] for line in scan_source(textwrap.dedent(source), "m.py")]


def test_aliases_are_followed() -> None:
    assert _found(
        """
        import datetime as _dt
        import time as t
        from uuid import uuid4 as make_id
        from datetime import date
        _dt.datetime.now(_dt.timezone.utc)
        t.time_ns()
        make_id()
        date.today()
        """
    ) == [
        "from uuid import uuid4",
        "_dt.datetime.now()",
        "t.time_ns()",
        "make_id()",
        "date.today()",
    ]


def test_references_count_as_well_as_calls() -> None:
    assert _found(
        """
        import uuid, time
        import attrs
        @attrs.define
        class Row:
            id: str = attrs.field(factory=uuid.uuid4)
        started = time.perf_counter
        """
    ) == ["uuid.uuid4", "time.perf_counter"]


def test_entropy_modules_and_function_local_imports() -> None:
    assert _found(
        """
        def pick(items):
            import secrets
            return secrets.choice(items)

        def shuffle(items):
            from random import shuffle as mix
            mix(items)
            return random.Random(4).random()
        import random
        """
    ) == [
        "import secrets",
        "secrets.choice()",
        "from random import shuffle",
        "mix()",
        "random.Random()",
        "import random",
    ]


def test_conversions_of_a_given_instant_are_pure() -> None:
    assert _found(
        """
        import time
        time.gmtime(0)
        time.strftime("%Y", time.gmtime(0))
        time.asctime(time.gmtime(0))
        time.gmtime()
        time.strftime("%Y")
        time.localtime(0)
        """
    ) == ["time.gmtime()", "time.strftime()", "time.localtime()"]


def test_clean_code_and_lookalikes_are_not_reported() -> None:
    assert _found(
        """
        import datetime as dt
        from toolhost._adapters.system_clock import monotonic, new_id
        from . import time
        class Clock:
            def now(self): return dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
        def run(services):
            services.clock.now()
            time.time()  # a module of this package, not the stdlib's
            monotonic(); new_id()
            uuid = "uuid4"
            return dt.timedelta(seconds=1)
        """
    ) == []


def test_a_module_that_does_not_parse_is_a_finding() -> None:
    assert scan_source("def broken(:\n", "b.py")[0].startswith("b.py:1: cannot parse:")


def test_allowed_files_and_directories_are_exempt(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "determinism.py").write_text("import time\ntime.time()\n")
    (tmp_path / "pkg" / "sub" / "clock.py").write_text("import time\ntime.monotonic()\n")
    (tmp_path / "pkg" / "tool.py").write_text("import uuid\nuuid.uuid1()\n")
    everything = find_ambient_reads([tmp_path])
    assert len(everything) == 3
    assert find_ambient_reads(
        [tmp_path], allowed=[tmp_path / "pkg" / "determinism.py", tmp_path / "pkg" / "sub"]
    ) == [f"{tmp_path / 'pkg' / 'tool.py'}:2: uuid.uuid1()"]
    # A file named twice (as itself and inside a directory) is scanned once.
    assert len(find_ambient_reads([tmp_path / "pkg" / "tool.py", tmp_path])) == 3


def test_star_imports_bind_the_ambient_names() -> None:
    assert _found(
        """
        from time import *
        from datetime import *
        from os import *
        time()
        datetime.now()
        date.today()
        urandom(4)
        """
    ) == ["from time import *", "from os import *", "time()", "datetime.now()",
          "date.today()", "urandom()"]


def test_modules_imported_by_name_and_attributes_got_by_name_are_followed() -> None:
    assert _found(
        """
        import importlib, time
        from importlib import import_module as load
        importlib.import_module("datetime").datetime.now()
        __import__("time").time()
        __import__("os.path").urandom(4)
        load("uuid").uuid4()
        getattr(time, "time")()
        clock = getattr(importlib.import_module("time"), "monotonic")
        """
    ) == [
        "importlib.import_module('datetime').datetime.now()",
        "__import__('time').time()",
        "__import__('os.path').urandom()",
        "load('uuid').uuid4()",
        "getattr(time, 'time')()",
        "getattr(importlib.import_module('time'), 'monotonic')",
    ]


def test_the_event_loop_clock_is_time_monotonic() -> None:
    assert _found(
        """
        import asyncio
        from asyncio import get_event_loop
        async def body(arguments, context):
            started = asyncio.get_running_loop().time()
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 1
            ticks = loop.time
            return get_event_loop().time() - started
        def elsewhere(loop):
            return loop.time()  # a loop the scan cannot know is asyncio's
        """
    ) == [
        "asyncio.get_running_loop().time()",
        "loop.time()",
        "loop.time",
        "get_event_loop().time()",
    ]


def test_dynamic_lookalikes_are_not_reported() -> None:
    assert _found(
        """
        import importlib, os, asyncio
        FLAG = getattr(os, "O_CLOEXEC", 0)
        module = importlib.import_module("toolhost_math.evaluate")
        value = getattr(importlib.import_module(name), "x")
        loop = asyncio.get_running_loop()
        def handler(loop):
            loop.time()
        def other():
            loop = make_loop()
            return loop.time()
        """
    ) == []
