"""The adaptive concurrency limit (connectors.ratelimit.adaptive), sample by sample."""

from __future__ import annotations

import pytest

from connectors.ratelimit.adaptive import (
    AdaptiveLimit,
    AdaptiveSettings,
    record_concurrency,
)
from enrich.lookup.metrics import JoinMetrics

BASE = 0.005


def probe(limit: AdaptiveLimit, latency: float = BASE) -> int:
    """Answer the probe (the limit pinned low) at ``latency``; the limit after it."""
    assert limit.is_probing()
    while limit.is_probing():
        limit.sample(latency, in_flight=1)
    return limit.limit


def window(limit: AdaptiveLimit, latency: float, *, in_flight: int | None = None) -> int:
    """Feed equal samples, as a closed loop at the limit answers, until the limit moves
    (the requests sent under the old limit drain, then a window fills) or surely would
    have; the limit after it."""
    before = limit.limit
    size = max(AdaptiveSettings().window_samples, before // 2)
    for _ in range(4 * size + 2 * before):
        limit.sample(latency, in_flight=before if in_flight is None else in_flight)
        if limit.limit != before:
            break
    return limit.limit


def knee_latency(in_flight: int, knee: int = 200) -> float:
    """The test service's knee: flat below ``knee`` in flight, growing as the square above."""
    return BASE if in_flight <= knee else BASE * (in_flight / knee) ** 2


def test_measures_the_unloaded_latency_first_with_the_limit_pinned_low() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=10))
    assert limit.limit == 4 and limit.target_latency() is None
    for _ in range(30):  # answers of requests sent before the pin: loaded, ignored
        limit.sample(1.0, in_flight=9)
    assert limit.is_probing()

    assert probe(limit) == 10
    assert limit.target_latency() == pytest.approx(2 * BASE)


def test_grows_while_latency_stays_below_the_target() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=10, maximum=1000))
    probe(limit)
    seen = [window(limit, BASE) for _ in range(6)]

    assert seen == sorted(seen)
    assert seen[-1] > 60  # below the target the gradient grows it x1.5 a window


def test_does_not_grow_when_the_limit_is_not_used() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=20))
    probe(limit)
    for _ in range(10):
        window(limit, BASE, in_flight=3)

    assert limit.limit == 20


def test_leaves_out_the_answers_sent_under_the_old_limit() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=100, maximum=1000, probe_every=10**6))
    probe(limit)
    assert window(limit, BASE) == 149  # x1.5 (less a rounding), 100 in flight at the close

    for _ in range(99):  # the other 99 were sent at 100 in flight: fast, and no news
        limit.sample(BASE, in_flight=149)
    assert limit.limit == 149  # counted, they would have grown it again, to 223
    for _ in range(74):  # a window of requests sent at 149 in flight: past the knee
        limit.sample(4 * BASE, in_flight=149)

    assert limit.limit == 74  # halved: 149 * max(0.5, 10 / 20)


def test_a_probe_drains_what_the_old_limit_sent() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=100, maximum=1000, probe_every=1))
    probe(limit)
    for _ in range(50):  # a window: the limit grows, and the next probe starts
        limit.sample(BASE, in_flight=100)
    probe(limit)  # counts only answers within its pin: the old ones are gone by its end
    assert limit.limit == 149

    for _ in range(74):  # the first window after the probe counts from its first answer
        limit.sample(BASE, in_flight=149)

    assert limit.statistics().increases == 2  # it closed, and grew the limit again


def test_grows_only_when_the_demand_filled_the_limit() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=100, maximum=1000, probe_every=10**6))
    probe(limit)

    assert window(limit, BASE, in_flight=80) == 100  # fast, but 80 used: nothing learnt
    assert window(limit, BASE, in_flight=95) == 149


def test_shrinks_by_the_gradient_when_latency_rises_above_the_target() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=100, maximum=100))
    probe(limit)  # the unloaded latency: 5 ms, the target 10 ms

    after = window(limit, 0.0125)

    assert after == 80  # 100 * 10 / 12.5
    assert limit.statistics().decreases == 1


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
        window(limit, BASE)
    assert limit.limit == 8
    for _ in range(50):
        limit.sample(1.0, in_flight=8, throttled=True)
        window(limit, 1.0)
    assert limit.limit == 2


def test_finds_the_knee_and_recovers_after_an_overload() -> None:
    # A closed loop: every request of the limit is in flight, at the knee's latency.
    limit = AdaptiveLimit(AdaptiveSettings(initial=16, maximum=2000, probe_every=10**6))
    probe(limit)
    levels = [window(limit, knee_latency(limit.limit)) for _ in range(100)]
    settled = levels[-50:]
    # At most twice the unloaded latency: (in flight / 200) ** 2 <= 2, in flight <= 283,
    # give or take one step.
    assert min(settled) >= 200 and max(settled) <= 300

    for _ in range(3000):  # the store throttles everything for a while: one cut a window
        limit.sample(BASE, in_flight=limit.limit, throttled=True)
    assert limit.limit < 20
    for _ in range(100):  # and recovers
        window(limit, knee_latency(limit.limit))
    assert limit.limit >= 200


def test_probes_again_and_follows_a_store_that_became_slower() -> None:
    limit = AdaptiveLimit(AdaptiveSettings(initial=50, probe_every=5))
    probe(limit)
    for _ in range(5):
        window(limit, 4 * BASE)  # above the target: the limit shrinks
    assert limit.is_probing() and limit.limit == 4

    probe(limit, 4 * BASE)  # the slower store's unloaded latency

    assert limit.target_latency() == pytest.approx(8 * BASE)


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
    window(limit, BASE)
    limit.sample(BASE, in_flight=10, throttled=True)
    first, second = JoinMetrics(), JoinMetrics()

    record_concurrency(first, _Source(limit))
    record_concurrency(second, _Source(limit))
    record_concurrency(second, _Source(None))  # a source without: nothing changes
    record_concurrency(second, object())

    now = limit.limit
    assert (first.concurrency_limit, first.throttled) == (now, 1)
    assert first.target_latency == pytest.approx(BASE * 2)
    assert (second.concurrency_limit, second.throttled) == (now, 0)
    first.merge(second)
    assert (first.concurrency_limit, first.throttled) == (now, 1)
    assert f"concurrency limit {now}, target 10.0ms, throttled 1" in first.summary()
