"""Waits the demo announces: no step of ``enrich demo`` waits in silence.

:func:`waiting` prints what a blocking step waits for before it starts, a reminder while
it lasts, and how long it took once it ends.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

REMIND_EVERY = 10.0  # seconds between two "still waiting" lines


def _say(line: str) -> None:
    print(line, flush=True)


@contextlib.contextmanager
def waiting(
    what: str,
    done: str,
    *,
    every: float = REMIND_EVERY,
    say: Callable[[str], None] = _say,
) -> Iterator[None]:
    """Announce a wait for the block's duration.

    Says ``waiting for <what> ...`` at once, ``still waiting for <what> (N s)`` every
    ``every`` seconds while the block runs (from a thread of its own, as the block may
    be a call that blocks), and ``<done> (N s)`` when the block ends without error.
    """
    say(f"   waiting for {what} ...")
    started = time.monotonic()
    over = threading.Event()

    def remind() -> None:
        while not over.wait(every):
            say(f"   still waiting for {what} ({time.monotonic() - started:.0f} s)")

    reminder = threading.Thread(target=remind, name="demo-wait", daemon=True)
    reminder.start()
    try:
        yield
    finally:
        over.set()
        reminder.join()
    say(f"   {done} ({time.monotonic() - started:.0f} s)")
