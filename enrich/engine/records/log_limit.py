"""A cap on repeated log lines: at most a few per key (a store) per minute.

A store that is down fails every row of every batch; one warning per failed row would
bury everything else. The metrics count every failure by reason; the log needs a few
examples, and how many were held back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

DEFAULT_LINES = 5  # lines per key and window
DEFAULT_WINDOW = 60.0  # seconds


class LogLimit:
    """Admits at most ``lines`` log lines per key in each ``window`` seconds.

    Windows are fixed and per key: the first line of a key opens its window, and the
    first line after it ends opens the next. :meth:`admit` says whether a line may be
    logged and how many of that key's lines were held back since the last one admitted,
    so the admitted line can say so. Time comes from ``clock`` (seconds, monotonic), so
    tests move it by hand. Safe to call from several threads.
    """

    def __init__(
        self,
        lines: int = DEFAULT_LINES,
        window: float = DEFAULT_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if lines < 1 or window <= 0:
            raise ValueError(f"lines must be >= 1 and window > 0, got {lines}, {window}")
        self.lines = lines
        self.window = window
        self._clock = clock
        self._lock = threading.Lock()
        self._state: dict[Hashable, list[float]] = {}  # key -> [opened, admitted, held]

    def admit(self, key: Hashable) -> int | None:
        """None when this line must not be logged; else the number held back before it."""
        now = self._clock()
        with self._lock:
            state = self._state.get(key)
            if state is None or now - state[0] >= self.window:
                held = 0 if state is None else int(state[2])
                self._state[key] = [now, 1, 0]
                return held
            if state[1] < self.lines:
                state[1] += 1
                held, state[2] = int(state[2]), 0
                return held
            state[2] += 1
            return None
