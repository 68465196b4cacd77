"""Arrivals as a service counted them: the busiest window of a given width."""

from __future__ import annotations

import bisect
from collections.abc import Iterable


def busiest_window(
    starts: Iterable[float], width: float, *, within: tuple[float, float] | None = None
) -> int:
    """The most arrivals in any window ``[t, t + width]``; with ``within=(a, b)``, only
    windows lying inside ``[a, b]`` count."""
    ordered = sorted(starts)
    low, high = within if within is not None else (ordered[0] if ordered else 0.0, float("inf"))
    # The busiest window can be taken to start at an arrival or to end at one; or, cut
    # by the span, to start at its beginning or end at its end.
    candidates = [low, high - width, *ordered, *(t - width for t in ordered)]
    best = 0
    for start in candidates:
        if start < low or start + width > high:
            continue
        first = bisect.bisect_left(ordered, start)
        best = max(best, bisect.bisect_right(ordered, start + width) - first)
    return best
