"""Adaptive concurrency: the in-flight limit at which a store stays near its unloaded latency.

A synchronous state machine, fed one sample per finished request (its latency, whether
the store throttled it, how many requests were in flight), that says how many requests
may be in flight now. It owns no clock and no task: the connectors time their requests
and apply :attr:`AdaptiveLimit.limit` to their request slots (see ``connectors``'
``concurrency="auto"``), so every decision can be replayed sample by sample in a test.

It follows Envoy's adaptive concurrency filter (the latency measured unloaded, with the
limit pinned low; a target 25% above it) and Netflix's Gradient2 (move by the gradient
between that target and what the requests see now; never grow a limit the demand does
not use), made for a client on a busy machine, whose every measured latency carries its
own scheduling delay (a response waits for the loop, the loop for a CPU: on a loaded
2-core machine a 20 ms service measured 25-45 ms):

* **Fast answers, not the mean.** The delay only ever adds, and it does not hit every
  answer, so the unloaded latency is the *fastest* answer of the probe, and a window is
  judged by its fastest quarter (``FAST_QUANTILE``): a store that queues slows every
  request down, fast ones included. Judged by the mean, the client's own delay read as a
  store past its knee; judged by the single fastest answer, a request that met a
  moment of low load hid a knee already passed.
* **Damped moves.** A window moves the limit by the square root of the gradient
  ``target / fast latency`` (at most x1.5 up, at most halving): where latency grows as
  the square of the excess in flight (a saturated store), that lands on the target in
  one move; where it grows linearly (a queue), in a few. The full gradient halved a
  limit 40% past the knee, then regrew it: it swung around the knee.
* **Two windows agree before a move.** A window of a stalled machine (every answer
  late) or of a lucky moment says as much as a real change, once: the limit moves when
  two windows in a row point the same way, by the milder of their steps.

The rules:

* first, and again every ``probe_every`` windows (500: a probe of about 10 round trips
  costs about 1%), or after 5 windows in a row slower than the target with the limit
  at the probe's level (the store became slower for good: Envoy's rule, which waits for
  the minimum), a probe pins the limit to ``probe_limit`` until twice
  ``window_samples`` answers arrived with no more than that in flight; their fastest is
  the unloaded latency, and the target is that times ``tolerance`` (1.25);
* samples are grouped into windows of ``max(window_samples, limit // 2)`` answers
  (about half a round of the limit);
* after the limit moves, the answers of the requests already in flight are left out of
  the next window: they were sent under the old limit, and say nothing of the new one;
* a window with a throttled request (HTTP 429/503, a timeout) multiplies the limit by
  ``backoff`` at once, without waiting for the window to fill, and at most once a window;
* two windows in a row whose fast latency is above the target shrink the limit by the
  square root of the gradient (the milder of the two, at most halving it), never below
  ``probe_limit`` (4): latency measured there is the unloaded one by definition, and a
  client that is busy with its own work (a loopback Redis, where decoding is the cost)
  sees its latency grow with every request it overlaps, down to a limit of one, which
  loses the overlap of its work with the store's; a throttled request goes lower (as
  Envoy keeps a minimum concurrency of 3);
* two windows in a row at or under the target grow it the same way (at most x1.5),
  provided the requests used at least nine tenths of it: a limit the demand did not fill
  does not grow, its latency says nothing about more (as TCP keeps an
  application-limited window, RFC 7661; Gradient2 asks for half, with which a bursty
  demand grew the limit to twice what it used, and its next burst sent all of it).
"""

from __future__ import annotations

import math
import os
from collections.abc import Hashable
from dataclasses import dataclass

from ..engine.checks import check_int, check_positive

DEFAULT_INITIAL = 16
# The target latency is the unloaded one plus this share (Envoy's buffer, 25%).
DEFAULT_TOLERANCE = 1.25
DEFAULT_BACKOFF = 0.9
DEFAULT_WINDOW_SAMPLES = 20
# The unloaded latency is measured with this many requests in flight, every so many
# windows (Envoy's adaptive concurrency pins its limit the same way, every minute).
DEFAULT_PROBE_LIMIT = 4
DEFAULT_PROBE_EVERY = 500
# A window is judged by the latency below which this share of its answers came.
FAST_QUANTILE = 0.25
# A limit at the probe's level whose windows stay slower than the target this many times
# in a row measures the unloaded latency again (the store became slower for good).
PROBE_WHEN_STUCK = 5
# A move changes the limit at most by these factors.
MAX_GROWTH = 1.5
MAX_CUT = 0.5


@dataclass(frozen=True, kw_only=True)
class AdaptiveSettings:
    """How an adaptive limit moves. Frozen, validated on construction.

    Attributes:
        initial: the limit after the first probe.
        minimum: the limit never goes below this.
        maximum: nor above this (a connector passes its pool size).
        tolerance: the target latency (a window's fast answers) is the unloaded one
            times this (> 1).
        backoff: the factor applied on a throttled request (between 0 and 1).
        window_samples: the fewest samples a window holds (a probe, twice that).
        probe_limit: the limit while the unloaded latency is measured.
        probe_every: windows between two such measurements.

    Raises:
        ValueError: a setting is invalid; the message names it and its value.
    """

    initial: int = DEFAULT_INITIAL
    minimum: int = 1
    maximum: int = 1000
    tolerance: float = DEFAULT_TOLERANCE
    backoff: float = DEFAULT_BACKOFF
    window_samples: int = DEFAULT_WINDOW_SAMPLES
    probe_limit: int = DEFAULT_PROBE_LIMIT
    probe_every: int = DEFAULT_PROBE_EVERY

    def __post_init__(self) -> None:
        for name in (
            "initial",
            "minimum",
            "maximum",
            "window_samples",
            "probe_limit",
            "probe_every",
        ):
            check_int(name, getattr(self, name))
        if not self.minimum <= self.maximum:
            raise ValueError(f"minimum must be <= maximum, got {self.minimum} > {self.maximum}")
        if not self.minimum <= self.initial <= self.maximum:
            raise ValueError(
                f"initial must lie in [minimum, maximum] = [{self.minimum}, {self.maximum}], "
                f"got {self.initial}"
            )
        if check_positive("tolerance", self.tolerance) <= 1:
            raise ValueError(f"tolerance must be > 1, got {self.tolerance!r}")
        if not 0 < check_positive("backoff", self.backoff) < 1:
            raise ValueError(f"backoff must be between 0 and 1, got {self.backoff!r}")


@dataclass(frozen=True)
class LimitStatistics:
    """A snapshot of an adaptive limit.

    Attributes:
        limit: requests allowed in flight now.
        target_latency: the latency a window's fast answers aim at, seconds (None
            before the first probe ended).
        throttled: requests the store throttled (429/503, timeouts) so far.
        decreases / increases: the limit's moves so far.
    """

    limit: int
    target_latency: float | None
    throttled: int
    decreases: int
    increases: int


class AdaptiveLimit:
    """An in-flight limit that follows the store's latency and its throttling.

    Guarantees: ``limit`` stays within ``[minimum, maximum]`` (a probe pins it to
    ``min(probe_limit, maximum)``); outside a probe it moves by latency only when two
    windows in a row agree, by at most x1.5 up or x0.5 down and never below the probe's
    level (only a throttled request takes it lower); it never grows in a window
    with a throttled request or with fast answers above the target, nor in one that used
    less than nine tenths of it; a throttled request lowers it at most once a window.
    """

    __slots__ = (
        "_decreases",
        "_increases",
        "_latencies",
        "_limit",
        "_no_load",
        "_peak",
        "_probe_count",
        "_probe_fastest",
        "_probing",
        "_settings",
        "_settling",
        "_since_probe",
        "_stuck",
        "_throttled",
        "_throttled_now",
        "_unreported",
        "_verdict",
    )

    def __init__(self, settings: AdaptiveSettings | None = None) -> None:
        self._settings = settings or AdaptiveSettings()
        self._limit = float(self._settings.initial)
        self._no_load: float | None = None
        self._throttled = self._decreases = self._increases = self._unreported = 0
        self._peak = self._stuck = 0
        self._latencies: list[float] = []  # the window's
        self._verdict: float | None = None  # the last window's step, if it did not move
        self._throttled_now = False
        # Answers still to leave out: requests sent before the limit moved.
        self._settling = 0
        self._probing = True  # the unloaded latency is measured first
        self._probe_count = self._since_probe = 0
        self._probe_fastest = math.inf

    @property
    def limit(self) -> int:
        """Requests allowed in flight now."""
        if self._probing:
            return min(self._settings.probe_limit, self._settings.maximum)
        return int(self._limit)

    def is_probing(self) -> bool:
        """Whether the limit is pinned low to measure the unloaded latency."""
        return self._probing

    def target_latency(self) -> float | None:
        """The latency a window's fast answers aim at (seconds), None until the first
        probe has ended."""
        if self._no_load is None:
            return None
        return self._no_load * self._settings.tolerance

    def sample(self, latency: float, *, in_flight: int, throttled: bool = False) -> int:
        """Record one finished request and return the limit that applies now.

        Args:
            latency: seconds from sending the request to its answer (or failure).
            in_flight: requests in flight when it finished, itself included.
            throttled: the store refused it for load (429, 503) or it timed out.
        """
        settings = self._settings
        if throttled:
            self._throttled += 1
            self._unreported += 1
        if self._probing:
            self._probe(latency, in_flight, throttled)
            return self.limit
        if throttled and not self._throttled_now:
            self._throttled_now = True
            before = int(self._limit)
            self._set(self._limit * settings.backoff)
            if int(self._limit) != before:
                self._verdict = None
        if self._settling:
            self._settling -= 1
            return self.limit
        latencies = self._latencies
        latencies.append(latency)
        if in_flight > self._peak:
            self._peak = in_flight
        if len(latencies) >= max(settings.window_samples, int(self._limit) // 2):
            if self._close_window():
                self._settling = in_flight - 1  # this answer is in, the rest still out
            self._since_probe += 1
            if self._since_probe >= settings.probe_every or self._stuck >= PROBE_WHEN_STUCK:
                self._probing = True
                self._stuck = 0
        return self.limit

    def statistics(self) -> LimitStatistics:
        """A snapshot: limit, target latency, throttled requests, moves."""
        return LimitStatistics(
            self.limit, self.target_latency(), self._throttled, self._decreases, self._increases
        )

    def take_throttled(self) -> int:
        """Throttled requests since the last call (so that joins sharing the limit each
        report their part once, and their sum is the whole)."""
        taken, self._unreported = self._unreported, 0
        return taken

    def _probe(self, latency: float, in_flight: int, throttled: bool) -> None:
        # Requests sent before the limit was pinned are still draining: their latency
        # is a loaded one, so only answers within the probe's limit count.
        settings = self._settings
        if throttled or in_flight > min(settings.probe_limit, settings.maximum):
            return
        self._probe_count += 1
        if latency < self._probe_fastest:
            self._probe_fastest = latency
        if self._probe_count >= 2 * settings.window_samples:
            self._no_load = self._probe_fastest
            self._probing = False
            self._probe_count = self._since_probe = 0
            self._probe_fastest = math.inf
            self._verdict = None
            self._new_window()

    def _close_window(self) -> bool:
        """Judge the window by its fast answers, move the limit if the last window
        agrees; whether it moved."""
        before = int(self._limit)
        if self._throttled_now:  # the backoff has moved it already
            self._verdict = None
        else:
            assert self._no_load is not None  # measured by the first probe
            ordered = sorted(self._latencies)
            fast = ordered[int(FAST_QUANTILE * len(ordered))]
            target = self._no_load * self._settings.tolerance
            # The gradient's square root: a damped step (see the module docstring).
            step = math.sqrt(target / fast) if fast > 0 else MAX_GROWTH
            last, self._verdict = self._verdict, step
            floor = self._floor()
            # Slower than the target at the probe's level: the store itself got slower.
            self._stuck = self._stuck + 1 if step < 1 and before <= floor else 0
            if last is not None and (step < 1) == (last < 1):
                if step < 1:
                    cut = self._limit * max(MAX_CUT, step, last)
                    self._set(max(cut, min(self._limit, floor)))
                elif self._peak * 10 >= before * 9:  # the limit was (nearly) full
                    self._set(self._limit * min(MAX_GROWTH, step, last))
            if int(self._limit) != before:
                self._verdict = None
        self._new_window()
        return int(self._limit) != before

    def _floor(self) -> int:
        """The lowest limit latency alone may set: the probe's level, where the latency
        measured is the unloaded one by definition (throttling may go lower)."""
        settings = self._settings
        return max(settings.minimum, min(settings.probe_limit, settings.maximum))

    def _set(self, limit: float) -> None:
        settings = self._settings
        limit = min(float(settings.maximum), max(float(settings.minimum), limit))
        if int(limit) < int(self._limit):
            self._decreases += 1
        elif int(limit) > int(self._limit):
            self._increases += 1
        self._limit = limit

    def _new_window(self) -> None:
        self._latencies = []
        self._peak = self._settling = 0
        self._throttled_now = False


def for_ceiling(ceiling: int) -> AdaptiveSettings:
    """The settings of a store's limit under ``ceiling`` connections: it starts at the
    default initial limit (or the ceiling, if lower) and never exceeds the ceiling."""
    return AdaptiveSettings(initial=min(DEFAULT_INITIAL, ceiling), maximum=ceiling)


# One limit per store per process (equal store settings share it, whatever the loop), so
# a join can read it from the task thread; a forked child starts without its parent's.
_limits: dict[Hashable, AdaptiveLimit] = {}
_limits_pid = 0


def process_limit(key: Hashable, ceiling: int) -> AdaptiveLimit:
    """This process's adaptive limit for the store ``key``, made on first use."""
    global _limits_pid
    if _limits_pid != os.getpid():
        _limits.clear()
        _limits_pid = os.getpid()
    limit = _limits.get(key)
    if limit is None:
        limit = _limits[key] = AdaptiveLimit(for_ceiling(ceiling))
    return limit


def peek_process_limit(key: Hashable) -> AdaptiveLimit | None:
    """This process's adaptive limit for ``key`` if one was made, else None."""
    return _limits.get(key) if _limits_pid == os.getpid() else None


def forget_process_limit(key: Hashable) -> None:
    """Drop this process's limit for ``key`` (the next use starts over)."""
    if _limits_pid == os.getpid():
        _limits.pop(key, None)
