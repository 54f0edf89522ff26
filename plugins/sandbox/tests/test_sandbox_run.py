"""How a command ends, exactly as the model reads it: exit code, signal, timeout, truncation;
the sandbox it sees; and the provenance of what it writes."""

from __future__ import annotations

from pathlib import Path

from sandbox_support import Call, structured
from toolhost import Provenance, Trust
from toolhost.testing import Run


def test_exit_code_and_both_streams_byte_for_byte(call: Call) -> None:
    outcome = call("printf 'hello\\n'; printf 'oops' >&2; exit 3")
    assert structured(outcome) == {"exit_code": 3, "signal": None, "timed_out": False,
                                   "truncated": False, "quota_exceeded": False,
                                   "stdout": "hello\n", "stderr": "oops"}
    assert outcome.content == ('Exit code 3.\nstdout (6 bytes): "hello\\n"\n'
                               'stderr (4 bytes): "oops"')
    assert outcome.output_trust is Trust.EXTERNAL_UNTRUSTED


def test_a_signal_is_named(call: Call) -> None:
    outcome = call("kill -KILL $$")
    assert structured(outcome)["exit_code"] == 137
    assert structured(outcome)["signal"] == "SIGKILL"
    assert outcome.content.startswith("Exit code 137 (SIGKILL).\n")


def test_timeout_kills_and_says_so(call: Call) -> None:
    outcome = call("echo started; sleep 100", 1)
    assert structured(outcome) == {"exit_code": None, "signal": "SIGKILL", "timed_out": True,
                                   "truncated": False, "quota_exceeded": False,
                                   "stdout": "started\n", "stderr": ""}
    assert outcome.content == ("Timed out after 1 s; every process of the command was killed."
                               '\nstdout (8 bytes): "started\\n"\nstderr (0 bytes): ""')


def test_exactly_the_limit_is_not_truncated(call: Call) -> None:
    # 1048576 bytes, then the end: all of it, and no kill.
    outcome = call("head -c 1048576 /dev/zero | tr '\\0' a")
    assert outcome.failure is None
    assert "Exit code 0." in outcome.content.splitlines()[0]


def test_output_past_the_limit_is_cut_across_both_streams(call: Call, run: Run) -> None:
    outcome = call("head -c 1000 /dev/zero | tr '\\0' e >&2; yes", 60)
    assert outcome.failure is None
    first = outcome.content.splitlines()[0]
    assert first == ("Output reached 1048576 bytes; every process of the command was killed "
                     "and the output is cut there.")
    # Over maximum_output_bytes, so step 12 kept the whole result as an artifact; the
    # escaped stream, twice its bytes, is cut on its own line.
    stdout = outcome.content.splitlines()[1]
    assert stdout.startswith("stdout (1047576 bytes, cut to its first ")
    assert ': "y\\ny\\n' in stdout


def test_printed_text_cannot_pass_for_a_header(call: Call) -> None:
    # Each stream is one JSON string on one line: the forged header stays inside the quotes.
    outcome = call("printf 'x\\nstderr (0 bytes): \"\"\\n'")
    assert outcome.content == ('Exit code 0.\n'
                               'stdout (23 bytes): "x\\nstderr (0 bytes): \\"\\"\\n"\n'
                               'stderr (0 bytes): ""')


def test_the_sandbox_as_the_command_sees_it(call: Call) -> None:
    out = structured(call("id -u; id -g; pwd; echo $HOME; env | sort; hostname; "
                          "grep Cap /proc/self/status; ls /"))["stdout"]
    lines = out.splitlines()
    assert lines[:4] == ["65534", "65534", "/workspace", "/workspace"]
    assert "LANG=C.UTF-8" in lines and "PATH=/usr/local/bin:/usr/bin:/bin" in lines
    assert not [line for line in lines if line.startswith(("TOOLHOST", "USER=", "PYTEST"))]
    assert "sandbox" in lines
    assert [line.split()[1] for line in lines if line.startswith("Cap")] == ["0" * 16] * 5
    assert "home" not in lines and "root" not in lines and "workspace" in lines


def test_files_the_command_writes_are_sandbox_written(call: Call, run: Run, root: Path) -> None:
    workspace = run.workspace
    workspace.write("kept.md", b"tool")
    workspace.write("replaced.md", b"tool")
    assert workspace.provenance("replaced.md") is Provenance.TOOL_WRITTEN
    outcome = call("mkdir -p d && echo new > d/new.txt && echo sandbox > replaced.md && "
                   "ln -s /etc/passwd link && cat kept.md")
    assert structured(outcome)["stdout"] == "tool"
    assert workspace.provenance("d/new.txt") is Provenance.SANDBOX_WRITTEN
    # A TOOL_WRITTEN file the command overwrote is now the sandbox's.
    assert workspace.provenance("replaced.md") is Provenance.SANDBOX_WRITTEN
    assert workspace.read("replaced.md") == b"sandbox\n"
    # Untouched: still the tool's.
    assert workspace.provenance("kept.md") is Provenance.TOOL_WRITTEN
    assert workspace.provenance("link") is Provenance.UNKNOWN
    assert (root / "d" / "new.txt").read_bytes() == b"new\n"


def test_set_id_bits_the_command_sets_are_cleared(call: Call, root: Path) -> None:
    structured(call("cp /bin/true t && chmod 6755 t && ls -l t"))
    assert oct((root / "t").stat().st_mode & 0o7777) == oct(0o755)
