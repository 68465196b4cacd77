"""Adaptive concurrency: the in-flight limit at which a store stays near its unloaded latency.

A synchronous state machine, fed one sample per finished request (its latency, whether
the store throttled it, how many requests were in flight), that says how many requests
may be in flight now. It owns no clock and no task: the connectors time their requests
and apply :attr:`AdaptiveLimit.limit` to their request slots (see ``connectors``'
``concurrency="auto"``), so every decision can be replayed sample by sample in a test.

The algorithm follows Envoy's adaptive concurrency filter (and Netflix's
concurrency-limits): measure the store's unloaded latency with the limit pinned low,
then move the limit by the gradient between that latency (times a tolerance) and what
the requests see now:

* first, and again every ``probe_every`` windows (500: about 250 round trips of
  the limit, so a probe of about 5 round trips costs about 2%), a probe pins the limit to
  ``probe_limit`` until ``window_samples`` answers arrived with no more than that in
  flight; their mean latency is the unloaded one, the target is that times ``tolerance``
  (2 by default: on a shared machine the client's own scheduling noise is part of every
  latency it measures);
* samples are grouped into windows of ``max(window_samples, limit // 2)`` requests (about
  half a round of the limit: long enough to average out one slow key, short enough to
  react within a few round trips);
* after a window moves the limit, the answers of the requests already in flight are left
  out of the next window: they were sent under the old limit, and a window of them says
  nothing of the new one (counting them let the limit grow a second and third time
  before any request sent at the first step's load had answered: a 2-core CI run saw 200
  in flight against a knee of 32);
* a window with a throttled request (HTTP 429/503, a timeout) multiplies the limit by
  ``backoff`` at once, without waiting for the window to fill, and at most once a window;
* a window whose mean is above the target shrinks the limit by ``target / mean`` (the
  gradient, at most halving it);
* a window at or under the target whose requests used at least nine tenths of the limit
  grows it by half the gradient's step (at most x1.5) or by ``sqrt(limit)``, whichever
  is more; a limit the demand did not fill does not grow: its latency says nothing about
  more (as TCP keeps an application-limited window, RFC 7661). With half, a bursty
  demand grew the limit to twice what it used, and the next burst sent all of it at
  once: 443 in flight against a knee at 200, where nine tenths peaked at 379.
"""

from __future__ import annotations

import math
import os
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from enrich.engine.checks import check_int, check_positive

if TYPE_CHECKING:
    from enrich.lookup.metrics import JoinMetrics

DEFAULT_INITIAL = 16
DEFAULT_TOLERANCE = 2.0
DEFAULT_BACKOFF = 0.9
DEFAULT_WINDOW_SAMPLES = 20
# The unloaded latency is measured with this many requests in flight, every so many
# windows (Envoy's adaptive concurrency pins its limit the same way, every minute).
DEFAULT_PROBE_LIMIT = 4
DEFAULT_PROBE_EVERY = 500


@dataclass(frozen=True, kw_only=True)
class AdaptiveSettings:
    """How an adaptive limit moves. Frozen, validated on construction.

    Attributes:
        initial: the limit before any sample.
        minimum: the limit never goes below this.
        maximum: nor above this (a connector passes its pool size).
        tolerance: the target latency is the unloaded one times this (> 1).
        backoff: the factor applied on a throttled request (between 0 and 1).
        window_samples: the fewest samples a window holds.
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
        target_latency: the latency it aims at, seconds (None before the first window).
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
    ``min(probe_limit, maximum)``); outside a probe it never grows in a window with a
    throttled request or a mean latency above the target, nor in one that used less
    than nine tenths of it; a throttled request lowers it at most once a window.
    """

    __slots__ = (
        "_count",
        "_decreases",
        "_increases",
        "_limit",
        "_no_load",
        "_peak",
        "_probe_count",
        "_probe_sum",
        "_probing",
        "_settings",
        "_settling",
        "_since_probe",
        "_sum",
        "_throttled",
        "_throttled_now",
        "_unreported",
    )

    def __init__(self, settings: AdaptiveSettings | None = None) -> None:
        self._settings = settings or AdaptiveSettings()
        self._limit = float(self._settings.initial)
        self._no_load: float | None = None
        self._throttled = self._decreases = self._increases = self._unreported = 0
        self._count = self._peak = 0
        self._sum = 0.0
        self._throttled_now = False
        # Answers still to leave out: requests sent before the window moved the limit.
        self._settling = 0
        self._probing = True  # the unloaded latency is measured first
        self._probe_count = self._since_probe = 0
        self._probe_sum = 0.0

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
        """The latency aimed at (seconds), None until the first probe has ended."""
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
            self._set(self._limit * settings.backoff)
        if self._settling:
            self._settling -= 1
            return self.limit
        self._count += 1
        self._sum += latency
        if in_flight > self._peak:
            self._peak = in_flight
        if self._count >= max(settings.window_samples, int(self._limit) // 2):
            if self._close_window():
                self._settling = in_flight - 1  # this answer is in, the rest still out
            self._since_probe += 1
            if self._since_probe >= settings.probe_every:
                self._probing = True
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
        self._probe_sum += latency
        if self._probe_count >= settings.window_samples:
            self._no_load = self._probe_sum / self._probe_count
            self._probing = False
            self._probe_count = self._since_probe = 0
            self._probe_sum = 0.0
            self._new_window()

    def _close_window(self) -> bool:
        """Move the limit by the window's mean; whether it moved."""
        settings = self._settings
        before = int(self._limit)
        mean = self._sum / self._count
        assert self._no_load is not None  # measured by the first probe
        target = self._no_load * settings.tolerance
        if not self._throttled_now:
            headroom = max(1.0, math.sqrt(self._limit))
            if mean > target:
                self._set(self._limit * max(0.5, target / mean))
            elif self._peak * 10 >= int(self._limit) * 9:  # the limit was (nearly) full
                # Half the gradient's step up (at most x1.5): a full step overshoots a
                # knee and swings around it.
                gradient = min(2.0, target / mean) if mean > 0 else 2.0
                step = self._limit * (gradient - 1) / 2
                self._set(self._limit + max(step, headroom))
        self._new_window()
        return int(self._limit) != before

    def _set(self, limit: float) -> None:
        settings = self._settings
        limit = min(float(settings.maximum), max(float(settings.minimum), limit))
        if int(limit) < int(self._limit):
            self._decreases += 1
        elif int(limit) > int(self._limit):
            self._increases += 1
        self._limit = limit

    def _new_window(self) -> None:
        self._count = self._peak = self._settling = 0
        self._sum = 0.0
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


class HasAdaptiveLimit(Protocol):
    """A source with ``concurrency="auto"``: it names its process's limit."""

    def adaptive_limit(self) -> AdaptiveLimit | None: ...


def record_concurrency(metrics: JoinMetrics, source: object) -> None:
    """Copy ``source``'s adaptive limit, if it has one, into ``metrics``: the limit and
    target latency now, and the throttled requests not yet reported by any join."""
    ask = getattr(source, "adaptive_limit", None)
    limit = ask() if ask is not None else None
    if limit is None:
        return
    stats = limit.statistics()
    metrics.concurrency_limit = stats.limit
    metrics.target_latency = stats.target_latency
    metrics.throttled += limit.take_throttled()
