"""A test hook: pause the sink at a chosen point so a crash test can kill it there.

Only for crash tests. Random kill timing rarely lands between a batch's writes and its
commit, so the harness asks for that moment explicitly: with
``ENRICH_SINK_TEST_HOOK="before_commit:3"`` and ``ENRICH_SINK_TEST_HOOK_DIR=/some/dir``
in the job's environment, the sink writes ``/some/dir/before_commit-3`` (holding the
process id) when it reaches that point of batch 3, then waits to be killed, or goes on
once the harness creates ``/some/dir/before_commit-3.go`` (to change the world under
the job, e.g. restart Redis, and let it continue). Points:
``before_write`` and ``mid_write`` (in a task, before any row / after the first chunk is
staged), ``before_commit``, ``between_steps`` (after the first step of a stepwise commit
that has more) and ``after_commit`` (on the driver side). Unset, the hook
costs one dictionary lookup.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

HOOK = "ENRICH_SINK_TEST_HOOK"
HOOK_DIR = "ENRICH_SINK_TEST_HOOK_DIR"
_WAIT = 600.0  # seconds: the harness kills well before


def pause_if_asked(point: str, batch: str | int | None) -> None:
    """Block at ``point`` of ``batch`` when the environment asks for it (see above)."""
    wanted = os.environ.get(HOOK)
    if not wanted or batch is None:
        return
    if f"{point}:{batch}" not in wanted.split(","):
        return
    folder = Path(os.environ.get(HOOK_DIR, "."))
    mark = folder / f"{point}-{batch}"
    try:
        # Exclusive: several tasks of a batch may reach the point; one pause is enough.
        with open(mark, "x") as handle:
            handle.write(str(os.getpid()))
    except FileExistsError:
        return
    go = folder / f"{point}-{batch}.go"
    deadline = time.monotonic() + _WAIT
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
