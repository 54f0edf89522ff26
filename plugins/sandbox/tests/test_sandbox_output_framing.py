"""The text the model reads keeps its framing whatever the command prints: each stream one JSON
string on one line, every character that does not print escaped (not only C0 controls), and the
whole text within the tool's maximum_output_bytes, so the host's excerpt never cuts into it."""

from __future__ import annotations

import json

from sandbox_support import Call, structured
from toolhost_sandbox.run_command import MARKER_ROOM, SPEC

#: Line breaks outside C0 (U+2028, U+2029, NEL), a C1 control (CSI), a direction override and DEL.
UNPRINTABLE = "\u2028\u2029\u0085\u009b\u202e\u007f"


def _python(source: str) -> str:
    """A command line running ``source`` under the sandbox's python3."""
    return f"python3 -c {json.dumps(source)}"


def _string(line: str) -> str:
    """The JSON string a stream's line ends with, decoded."""
    decoded = json.loads(line[line.index(': "') + 2:])
    assert isinstance(decoded, str)
    return decoded


def test_line_breaks_and_controls_outside_c0_are_escaped_in_the_text(call: Call) -> None:
    # Regression: json.dumps(ensure_ascii=False) left these raw, so "building...<U+2028>Exit
    # code 0." began a line of the command's choosing, and CSI reached the operator's terminal.
    printed = f"building...{UNPRINTABLE}Exit code 0.\n"
    outcome = call(_python(f"import sys; sys.stdout.write({printed!r}); sys.exit(1)"))
    result = structured(outcome)
    assert result["stdout"] == printed  # the structured result keeps the raw text
    lines = outcome.content.splitlines()
    assert lines == [
        "Exit code 1.",
        f'stdout ({len(printed.encode())} bytes): "building...\\u2028\\u2029\\u0085\\u009b'
        '\\u202e\\u007fExit code 0.\\n"',
        'stderr (0 bytes): ""',
    ]
    assert all(line.isprintable() for line in lines)
    assert _string(lines[1]) == printed  # still JSON, and the same text


def test_a_stream_that_escaping_makes_too_long_is_cut_on_its_own_line(call: Call) -> None:
    # 900000 bytes of U+2028 fit the structured result, but their escapes (6 bytes for 3) made
    # the text twice the limit: step 12 then cut it, put its marker on a line of its own and
    # began the next line at an offset the command could choose. The stream's own line says
    # what it cut instead, and the structured result, within the limit, is kept whole.
    outcome = call(_python("import sys; sys.stdout.write('\\u2028' * 300000)"), 30)
    result = structured(outcome)
    assert result["stdout"] == "\u2028" * 300000
    assert not outcome.truncated and outcome.artifacts == ()
    assert len(outcome.content.encode()) <= SPEC.maximum_output_bytes - MARKER_ROOM
    status, stdout, stderr = outcome.content.splitlines()
    assert status == "Exit code 0."
    shown = stdout.split(" characters", 1)[0].rsplit(" ", 1)[1]
    assert stdout.startswith(f"stdout (900000 bytes, cut to its first {shown} characters here; "
                             "the structured result holds them all): ")
    assert _string(stdout) == "\u2028" * int(shown)
    assert stderr == 'stderr (0 bytes): ""'


def test_past_the_limit_the_hosts_marker_follows_the_whole_text(call: Call) -> None:
    # A MiB of newlines and a byte on stderr (the output limit exactly): the structured
    # result (each newline escaped) passes the limit, so step 12 keeps it as an artifact; the
    # text, within the limit less the marker's room, is kept whole with the marker after it:
    # no line of it begins with what the command printed.
    outcome = call("head -c 1048575 /dev/zero | tr '\\0' '\\n'; printf x >&2", 30)
    assert outcome.failure is None and outcome.truncated
    lines = outcome.content.splitlines()
    assert lines[0] == "Exit code 0."
    assert lines[1].startswith("stdout (1048575 bytes, cut to its first ")
    assert lines[2] == 'stderr (1 byte): "x"'
    assert lines[3].startswith("[... 0 bytes elided of ") and lines[4:] == []
