"""D398's last gap, closed by the seccomp filter: on a host that is not root the byte quota is
the host's walk of the workspace, and a command told (by inotify) when the walk opens a
directory kept its data out of every listing, each walk "complete".

The trap: two directories ``A`` and ``B``, each with a subdirectory ``k`` of 20 000 empty
files. The walk is depth first: it lists a directory, then walks its subdirectories, so the
opening of ``A/k`` says ``A`` has been listed. Each time ``X/k`` is opened, a child of the
command moves the data directory ``D`` into ``X``: into the directory just listed, out of the
one the walk lists next (while the walk counts the 20 000 files of ``X/k``). With inotify the
command wrote 64 MB past a 16 MiB quota and ran to its end. Without it (ENOSYS) it writes
the same data with no trap, and the quota kills it.

Run as the host that is not root of test_sandbox_unlistable_dirs.py (nobody, when the tests
run as root), whose helpers these are.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import test_sandbox_unlistable_dirs as unlistable

data = unlistable.data  # the fixture: a data directory the host's user owns

#: ``python3 t.py``, in /workspace. Prints ``trap set`` once the child moves ``D`` (or why
#: there is no trap), ``wrote`` after 4 x 16 MB into ``D`` (through its fd: ``D`` moves),
#: ``done`` after holding them for several walks.
_TRAP = textwrap.dedent("""
    import ctypes, errno, os, signal, struct, time

    IN_OPEN = 0x20
    libc = ctypes.CDLL(None, use_errno=True)
    for side in "AB":
        os.makedirs(f"{side}/k")
        for i in range(20000):
            open(f"{side}/k/e{i}", "w").close()
    os.mkdir("A/D")
    data = os.open("A/D", os.O_RDONLY | os.O_DIRECTORY)
    fd, mover = libc.inotify_init1(0), 0
    if fd < 0:
        print("no inotify:", errno.errorcode[ctypes.get_errno()], flush=True)
    else:
        sides = {libc.inotify_add_watch(fd, f"{side}/k".encode(), IN_OPEN): side
                 for side in "AB"}
        moved, told = os.pipe()
        mover = os.fork()
        if mover == 0:
            at = "A"
            while True:
                raw, offset = os.read(fd, 65536), 0
                while offset < len(raw):
                    wd, _, _, size = struct.unpack_from("iIII", raw, offset)
                    offset += 16 + size
                    if sides.get(wd, at) != at:  # X/k opened: X was just listed
                        os.rename(f"{at}/D", f"{sides[wd]}/D")
                        at = sides[wd]
                        os.write(told, b".")
        # Three moves: the trap has gone round a whole walk and D is in no listing.
        for _ in range(3):
            os.read(moved, 1)
        print("trap set", flush=True)
    for k in range(4):
        f = os.open(f"f{k}", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=data)
        os.write(f, bytes(16_000_000))
        os.close(f)
    print("wrote", flush=True)
    time.sleep(8)  # several walks (about one a second over 40 000 entries)
    print("done", flush=True)
    if mover:
        os.kill(mover, signal.SIGKILL)
""")


def test_data_moved_out_of_each_listing_as_it_happens_cannot_pass_the_quota(
        data: Path) -> None:
    found = unlistable.as_host_user(data, f"cat > t.py <<'EOF'\n{_TRAP}\nEOF\npython3 t.py")
    call = found["calls"][0]
    assert call["failure"] is None
    result = call["structured"]
    # The trap cannot be set: the data is counted at the next walk, and the sandbox killed.
    assert (result["signal"], result["quota_exceeded"]) == ("SIGKILL", True), result
    assert result["stdout"].startswith("no inotify: ENOSYS\n"), result
    assert "done" not in result["stdout"], result
    assert call["content"].startswith("The workspace passed its quota (16 MiB")
    assert found["ended"] == "ok"
