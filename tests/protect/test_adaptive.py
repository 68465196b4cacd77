"""The adaptive concurrency limit (enrich.protect.adaptive), sample by sample."""

from __future__ import annotations

import math

import pytest

from enrich.engine.records.call_metrics import JoinMetrics, record_concurrency
from enrich.protect.adaptive import (
    FAST_QUANTILE,
    PROBE_WHEN_STUCK,
    AdaptiveLimit,
    AdaptiveSettings,
)

BASE = 0.005
TARGET = 1.25 * BASE  # the default tolerance
GROW = math.sqrt(1.25)  # a window at the unloaded latency: the gradient's square root


def probe(limit: AdaptiveLimit, latency: float = BASE) -> int:
    """Answer the probe (the limit pinned low) at ``latency``; the limit after it."""
    assert limit.is_probing()
    while limit.is_probing():
        limit.sample(latency, in_flight=1)
    return limit.limit


def windows(limit: AdaptiveLimit, latency: float, count: int, in_flight: int | None = None) -> None:
    """``count`` windows of equal samples, the limit full unless ``in_flight`` says; after
    a window that moved the limit, the answers sent under the old one drain first."""
    for _ in range(count):
        before = limit.limit
        size = max(AdaptiveSettings().window_samples, before // 2)
        load = before if in_flight is None else in_flight
        for _ in range(size):
            limit.sample(latency, in_flight=load)
        if limit.limit != before and not limit.is_probing():
            for _ in range(load - 1):
                limit.sample(latency, in_flight=limit.limit)


def settle_moves(limit: AdaptiveLimit, latency: float, *, in_flight: int | None = None) -> int:
    """Feed equal samples, as a closed loop at the limit answers, until the limit moves
    (the requests sent under the old limit drain, then two windows agree) or surely
    would have; the limit after it."""
    before = limit.limit
    size = max(AdaptiveSettings().window_samples, before // 2)
    for _ in range(6 * size + 2 * before):
        limit.sample(latency, in_flight=before if in_flight is None else in_flight)
        if limit.limit != before:
            break
    return limit.limit


def knee_latency(in_flight: int, knee: int = 200) -> float:
    """A store's knee: flat below ``knee`` in flight, growing as the square above."""
    return BASE if in_flight <= knee else BASE * (in_flight / knee) ** 2


def test_measures_the_unloaded_latency_first_by_the_probes_fastest_answer() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=10))
    assert limit.limit == 4 and limit.target_latency() is None
    for _ in range(30):  # answers of requests sent before the pin: loaded, ignored
        limit.sample(1.0, in_flight=9)
    assert limit.is_probing()

    # The client's own delays make most answers late: only the fastest tells the store's.
    for n in range(39):
        limit.sample(BASE if n == 17 else 3 * BASE, in_flight=4)
    assert limit.is_probing()  # twice window_samples answers
    limit.sample(3 * BASE, in_flight=4)

    assert not limit.is_probing() and limit.limit == 10
    assert limit.target_latency() == pytest.approx(TARGET)


def test_a_window_is_judged_by_its_fast_quarter_not_its_mean() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=16, probe_every=10**6))
    probe(limit)
    fast = int(FAST_QUANTILE * 20) + 1
    for _ in range(2):  # most answers waited for a busy client: their store was fast
        for n in range(20):
            limit.sample(BASE if n < fast else 10 * BASE, in_flight=16)

    assert limit.limit == int(16 * GROW) == 17


def test_grows_while_latency_stays_at_the_unloaded_one() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=10, maximum=1000, probe_every=10**6))
    probe(limit)
    seen = [settle_moves(limit, BASE) for _ in range(10)]

    assert seen == sorted(seen) and len(set(seen)) == 10
    assert seen[-1] == int(10 * GROW**10)  # 30: x1.118 a move, two windows a move


def test_one_window_does_not_move_the_limit_two_agreeing_do() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=40, probe_every=10**6))
    probe(limit)
    windows(limit, 10 * BASE, 1)  # a stalled machine: every answer late, once
    windows(limit, BASE, 1)
    windows(limit, 10 * BASE, 1)
    assert limit.limit == 40

    windows(limit, 10 * BASE, 1)  # twice in a row: the store is slow
    assert limit.limit == 20  # sqrt(1.25 / 10) = 0.35: at most halved


def test_lands_on_a_quadratic_knee_in_one_move() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=200, maximum=1000, probe_every=10**6))
    probe(limit)

    after = settle_moves(limit, knee_latency(200, knee=100))

    # (200 / 100) ** 2 = 4 times the unloaded latency: x sqrt(1.25 / 4) = 111.8, where the
    # knee's latency is 1.25 times the unloaded one, the target.
    assert after == int(200 * math.sqrt(1.25 / 4)) == 111
    for _ in range(5):  # and it stays there
        settle_moves(limit, knee_latency(limit.limit, knee=100))
    assert limit.limit in (111, 112)


def test_does_not_grow_when_the_limit_is_not_used() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=20))
    probe(limit)
    windows(limit, BASE, 10, in_flight=3)

    assert limit.limit == 20


def test_grows_only_when_the_demand_filled_nine_tenths_of_the_limit() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=100, maximum=1000, probe_every=10**6))
    probe(limit)

    assert settle_moves(limit, BASE, in_flight=89) == 100  # fast, but 89 used
    assert settle_moves(limit, BASE, in_flight=90) == int(100 * GROW) == 111


def test_leaves_out_the_answers_sent_under_the_old_limit() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=100, maximum=1000, probe_every=10**6))
    probe(limit)
    assert settle_moves(limit, BASE) == 111  # 100 in flight when the second window closed

    for _ in range(99):  # the other 99 were sent at 100 in flight: fast, and no news
        limit.sample(BASE, in_flight=111)
    windows(limit, BASE, 1)  # one window of requests sent at 111: fast too
    assert limit.limit == 111  # counted, the 99 would have made it a second window
    windows(limit, 4 * BASE, 2)  # two windows at 111 in flight: past the knee

    assert limit.limit == int(111.8 * math.sqrt(1.25 / 4)) == 62


def test_a_probe_drains_what_the_old_limit_sent() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=100, maximum=1000, probe_every=2))
    probe(limit)
    windows(limit, BASE, 2)  # two windows: the limit grows, and the next probe starts
    assert limit.is_probing()
    probe(limit)  # counts only answers within its pin: the old ones are gone by its end
    assert limit.limit == 111

    windows(limit, BASE, 2)  # the windows after the probe count from its first answer

    assert limit.statistics().increases == 2 and limit.is_probing()


def test_a_throttled_request_backs_off_at_once_and_once_a_window() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=100, maximum=100))
    probe(limit)
    assert limit.sample(BASE, in_flight=100, throttled=True) == 90
    for _ in range(5):  # the same overload's other answers: no further cut
        assert limit.sample(BASE, in_flight=90, throttled=True) == 90
    for _ in range(60):  # the window closes: no growth in a throttled window
        limit.sample(BASE, in_flight=90)
    next_cut = limit.sample(BASE, in_flight=90, throttled=True)

    assert next_cut == 81
    assert limit.statistics().throttled == 7
    assert limit.take_throttled() == 7
    assert limit.take_throttled() == 0


def test_stays_within_its_bounds() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=4, minimum=2, maximum=8, probe_every=10**6))
    probe(limit)
    for _ in range(20):
        settle_moves(limit, BASE)
    assert limit.limit == 8
    seen = []
    for _ in range(1000):  # throttled all along: a cut a window, down to the minimum
        seen.append(limit.sample(BASE, in_flight=limit.limit, throttled=True))
    assert min(seen) == 2 and limit.limit == 2


def test_finds_the_knee_and_recovers_after_an_overload() -> None:
    # A closed loop: every request of the limit is in flight, at the knee's latency.
    limit = AdaptiveLimit(AdaptiveSettings(initial=16, maximum=2000, probe_every=10**6))
    probe(limit)
    levels = [settle_moves(limit, knee_latency(limit.limit)) for _ in range(60)]
    # At the target: (in flight / 200) ** 2 <= 1.25, in flight <= 223, give or take one
    # (damped) step.
    assert min(levels[-20:]) >= 200 and max(levels[-20:]) <= 225

    for _ in range(3000):  # the store throttles everything for a while: one cut a window
        limit.sample(BASE, in_flight=limit.limit, throttled=True)
    assert limit.limit < 20
    for _ in range(60):  # and recovers
        settle_moves(limit, knee_latency(limit.limit))
    assert 200 <= limit.limit <= 225


def test_probes_again_and_follows_a_store_that_became_slower() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=50, probe_every=6))
    probe(limit)
    windows(limit, 4 * BASE, 6)  # above the target: the limit shrinks
    assert limit.is_probing() and limit.limit == 4

    probe(limit, 4 * BASE)  # the slower store's unloaded latency

    assert limit.target_latency() == pytest.approx(4 * TARGET)


def test_latency_alone_never_takes_the_limit_below_the_probes_level() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=16, probe_every=10**6))
    probe(limit)
    windows(limit, 100 * BASE, 4)  # halved twice: 16, 8, 4
    assert limit.limit == 4
    windows(limit, 100 * BASE, PROBE_WHEN_STUCK - 1)
    assert limit.limit == 4  # where the unloaded latency was measured

    for _ in range(3):  # a throttled request goes lower
        limit.sample(BASE, in_flight=4, throttled=True)
        windows(limit, BASE, 1, in_flight=1)
    assert limit.limit == 2


def test_a_limit_stuck_at_the_probes_level_probes_again() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=4, probe_every=10**6))
    probe(limit)
    windows(limit, 100 * BASE, PROBE_WHEN_STUCK - 1)  # slower than the target, at 4
    assert limit.limit == 4 and not limit.is_probing()

    windows(limit, 100 * BASE, 1)  # the fifth window in a row

    assert limit.is_probing()
    probe(limit, 100 * BASE)  # the store became slower for good
    assert limit.target_latency() == pytest.approx(100 * TARGET)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"initial": 0}, "initial must be an int >= 1, got 0"),
        ({"minimum": 5, "maximum": 4, "initial": 4}, "minimum must be <= maximum, got 5 > 4"),
        (
            {"initial": 50, "maximum": 10},
            "initial must lie in [minimum, maximum] = [1, 10], got 50",
        ),
        ({"tolerance": 1.0}, "tolerance must be > 1, got 1.0"),
        ({"probe_limit": 0}, "probe_limit must be an int >= 1, got 0"),
        ({"backoff": 1.5}, "backoff must be between 0 and 1, got 1.5"),
    ],
)
def test_settings_name_the_bad_value(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        AdaptiveSettings(**settings)  # type: ignore[arg-type]
    assert str(caught.value) == message


class _Source:
    def __init__(self, limit: AdaptiveLimit | None) -> None:
        self.limit = limit

    def adaptive_limit(self) -> AdaptiveLimit | None:
        return self.limit


def test_metrics_carry_the_limit_and_each_throttled_request_once() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=10))
    probe(limit)
    settle_moves(limit, BASE)
    limit.sample(BASE, in_flight=10, throttled=True)
    first, second = JoinMetrics(), JoinMetrics()

    record_concurrency(first, _Source(limit))
    record_concurrency(second, _Source(limit))
    record_concurrency(second, _Source(None))  # a source without: nothing changes
    record_concurrency(second, object())

    now = limit.limit
    assert (first.concurrency_limit, first.throttled) == (now, 1)
    assert first.target_latency == pytest.approx(TARGET)
    assert (second.concurrency_limit, second.throttled) == (now, 0)
    first.merge(second)
    assert (first.concurrency_limit, first.throttled) == (now, 1)
    assert f"concurrency limit {now}, target 6.2ms, throttled 1" in first.summary()
