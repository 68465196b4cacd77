"""Watching a command's process tree, to prove nothing it started outlives it; and a PATH
without ``redis-server``, to prove the embedded binary is found."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path


def descendants(root: int) -> dict[int, str]:
    """The live descendants of ``root``: pid -> command line (from /proc)."""
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            commands[int(entry.name)] = command.decode(errors="replace")
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces, so split after its ")".
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in found:
                found[child] = commands[child]
                frontier.append(child)
    return found


def runs_program(pid: int, program: str) -> bool:
    """Whether ``pid`` is alive (not a zombie) and runs the executable ``program``.

    Reads ``/proc/PID/exe``, which a server's rewritten process title does not change.
    """
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    return state != "Z" and exe == os.path.realpath(program)


def still_running(processes: dict[int, str]) -> dict[int, str]:
    """Those of ``processes`` that still run the same command (not zombies, not reused)."""
    alive = {}
    for pid, command in processes.items():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            now = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if state != "Z" and now.decode(errors="replace") == command:
            alive[pid] = command
    return alive


def path_without(programs: Iterable[str], directory: Path) -> str:
    """A PATH whose directories' programs are linked into ``directory``, except ``programs``."""
    skipped = set(programs)
    directory.mkdir(parents=True, exist_ok=True)
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not folder or not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            link = directory / name
            if name in skipped or link.exists() or link.is_symlink():
                continue
            link.symlink_to(os.path.join(folder, name))
    return str(directory)


def wait_gone(processes: dict[int, str], timeout: float = 30.0) -> dict[int, str]:
    """Wait until ``processes`` have ended; returns those still running at the deadline."""
    deadline = time.monotonic() + timeout
    left = still_running(processes)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = still_running(processes)
    return left
